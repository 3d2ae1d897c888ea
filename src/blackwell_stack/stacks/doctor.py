"""`stack doctor NAME --python PY`: every installed distribution that differs from the stack's lock.

What is compared:
- name and version: the venv's installed metadata against the lock;
- which file: the tags the installer recorded (.dist-info/WHEEL) against the
  lock's file names;
- its files: an installation has no archive to hash against the lock's
  sha256, so the locked wheel's own RECORD (read by HTTP range requests from
  the very file the lock names, the member checked by its zip CRC) is compared
  with the RECORD the installer wrote: installers copy files unchanged, so
  every path must be there with the same sha256 (.data/scripts, which they
  rewrite, excepted). `--verify-files` also hashes the files on disk (a Nix
  environment fails that for every ELF file autoPatchelf rewrote);
- the source-built kernel (not in the lock): installed, at the stack's
  version, and not the PyPI wheel (manylinux tags: auditwheel's repair);
- distributions the lock does not have, but for the tools the README
  installs beside it (the CLI, pip), which `uv sync --inexact` keeps.

Each difference comes with the one command that repairs it. A venv without
the stack's SGLang is no serving venv at all: that is said in three lines,
with the command that makes one, and every difference only with -v or --json.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.tags import parse_tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from blackwell_stack import output, parallel
from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.data.plan import CHECKED
from blackwell_stack.data.stack import LockedPackage, Stack
from blackwell_stack.errors import ExitCode, NetworkError, StackError
from blackwell_stack.fileio import atomic_write_json
from blackwell_stack.formats import remote_zip, wheelrecord, wheelzip
from blackwell_stack.formats.installed import Environment
from blackwell_stack.hashes import hex_to_record, sha256_file
from blackwell_stack.paths import cache_dir
from blackwell_stack.stacks import libraries

MISSING, VERSION, FILE, FILES, EXTRA, ON_DISK = "missing", "other version", "other file", "other file hash", "not in the lock", "changed on disk"
PYTHON = "other python"
# Installed beside the lock by the README's path (`uv pip install -e . pip`): the CLI and the pip the kernel build
# runs. `uv sync --inexact`, the repair of every difference at once, keeps them.
TOOLS = ("blackwell-stack", "pip")


@dataclass
class Difference:
    kind: str
    name: str
    locked: str | None
    installed: str | None
    detail: str
    repair: str


def _installed_tags(dist) -> set:
    lines = (dist.read_text("WHEEL") or "").splitlines()
    return {tag for line in lines if line.startswith("Tag:") for tag in parse_tag(line.split(":", 1)[1].strip())}


def _wheel_tags(wheel: dict) -> set:
    try:
        return set(parse_wheel_filename(wheels.filename(wheel))[3])
    except InvalidWheelFilename:
        return set()


def _record(text: str, where: str) -> dict[str, str]:
    """path -> sha256 (RECORD's urlsafe base64 form), for entries that have one."""
    rows = wheelrecord.parse_record(text, where, strict=False)
    return {path: digest for path, (algorithm, digest, _size) in rows.items() if algorithm == "sha256" and digest}


def locked_record(stack: Stack, package: LockedPackage, wheel: dict) -> dict[str, str]:
    """The RECORD inside the wheel the lock names (range requests; cached by the wheel's sha256)."""
    digest = lockfile.sha256_of(wheel) or "unknown"
    cached = cache_dir("wheel-records") / f"{digest}.json"
    found = libraries.read_cached(cached, dict)
    if found is not None:
        return found
    try:
        record = _read_locked_record(stack, package, wheel)
    except NetworkError as exc:  # an offline GPU host (the acceptance run's stack doctor step met this)
        raise NetworkError(exc.message, f"stack doctor reads each locked wheel's RECORD once, into {cached.parent}: "
                           "run it once where PyPI is reachable, or copy that directory from a host that did") from None
    atomic_write_json(cached, record)
    return record


def _record_member(names: list[str], wheel: dict) -> str:
    found = [n for n in names if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
    if len(found) != 1:
        raise StackError(f"{wheels.filename(wheel)} has {len(found)} .dist-info/RECORD files", "the wheel is malformed")
    return found[0]


def _read_locked_record(stack: Stack, package: LockedPackage, wheel: dict) -> dict[str, str]:
    local = stack.local_wheel(package, wheel)
    if local is not None:
        with wheelzip.open_zip(local) as zf:
            name = _record_member(zf.namelist(), wheel)
            return _record(wheelzip.read_member(zf, name, local).decode("utf-8", errors="replace"), f"{local}:{name}")
    with remote_zip.RemoteWheel(libraries.remote_file(wheel)) as rw:
        name = _record_member(rw.names, wheel)
        return _record(rw.fetch_member(name).read_text(), f"{wheels.filename(wheel)}:{name}")


def _record_differences(expected: dict[str, str], installed: dict[str, str]) -> list[str]:
    """Paths of the locked wheel whose sha256 the installation does not have.

    purelib/platlib files are at their own path; `.data/data` and `.data/headers`
    files land outside site-packages (RECORD names them ../../../share/...), so
    they are matched by the end of their path; `.data/scripts` are rewritten by
    installers and not compared.
    """
    by_hash: dict[str, list[str]] = {}
    for path, digest in installed.items():
        by_hash.setdefault(digest, []).append(path)
    out = []
    for path, digest in expected.items():
        if path.endswith(".dist-info/RECORD"):
            continue
        first, _, rest = path.partition("/")
        if first.endswith(".data"):
            scheme, _, rel = rest.partition("/")
            if scheme == "scripts":
                continue
            if scheme in ("purelib", "platlib"):
                if installed.get(rel) != digest:
                    out.append(path)
            elif not any(p.endswith("/" + rel) for p in by_hash.get(digest, [])):
                out.append(path)
        elif installed.get(path) != digest:
            out.append(path)
    return sorted(out)


def _on_disk(dist, installed: dict[str, str]) -> list[str]:
    """Installed files whose bytes differ from the installed RECORD."""
    files = {path: Path(str(dist.locate_file(path))) for path in installed}
    return [path for path, digest in installed.items()
            if not files[path].is_file() or hex_to_record(sha256_file(files[path])) != digest]


def _install(python: str, package: LockedPackage, wheel: dict) -> str:
    ref = wheel.get("url")
    what = (f"'{package.name} @ {ref}#sha256={lockfile.sha256_of(wheel)}'" if ref
            else shlex.quote(str(wheel.get("path"))))
    return f"uv pip install --python {python} --no-deps --reinstall {what}"


@dataclass
class Report:
    differences: list[Difference]
    matched: int  # distributions as locked
    tools: dict[str, str]  # TOOLS installed: name -> version
    serving: bool  # whether the stack's SGLang is installed at all


def _package_difference(stack: Stack, python: str, pkg: LockedPackage, wheel: dict, dist,
                        verify_files: bool) -> Difference | None:
    """How the installed `dist` differs from the locked package (uv installs `wheel` here), or None."""
    repair = _install(python, pkg, wheel)
    if dist is None:
        return Difference(MISSING, pkg.name, pkg.version, None, "not installed", repair)
    if dist.version != pkg.version:
        return Difference(VERSION, pkg.name, pkg.version, dist.version, f"{dist.version} installed", repair)
    tags = _installed_tags(dist)
    installed = _record(dist.read_text("RECORD") or "", f"{pkg.name}'s installed RECORD")
    # Which locked file was installed: the one whose RECORD the installation carries. Tried in
    # order: files whose tags the installed WHEEL names, then the one uv picks here, then the rest
    # (a wheel's WHEEL may name other tags than its file name: torch-memory-saver 0.0.9).
    order = sorted(pkg.wheels, key=lambda w: (not (_wheel_tags(w) & tags), w is not wheel))
    closest = None
    for candidate in [w for w in order if _wheel_tags(w) & tags or w is wheel]:
        differing = _record_differences(locked_record(stack, pkg, candidate), installed)
        if not differing:
            changed = _on_disk(dist, installed) if verify_files else []
            if not changed:
                return None
            return Difference(ON_DISK, pkg.name, pkg.version, dist.version, f"{len(changed)} files differ from the "
                              f"installed RECORD, e.g. {', '.join(changed[:3])}", _install(python, pkg, candidate))
        closest = closest or (candidate, differing)
    if closest is not None and _wheel_tags(closest[0]) & tags:
        cand, differing = closest
        return Difference(FILES, pkg.name, pkg.version, dist.version, f"{len(differing)} files differ from "
                          f"{wheels.filename(cand)}'s RECORD, e.g. {', '.join(differing[:3])}",
                          _install(python, pkg, cand))
    shown = ", ".join(sorted(str(t) for t in tags)) or "no tags (not installed from a wheel)"
    return Difference(FILE, pkg.name, pkg.version, dist.version,
                      f"installed from a file the lock does not list ({shown})", repair)


def compare(stack: Stack, python: str, *, verify_files: bool = False) -> Report:
    lock = stack.lock()
    env = Environment(python)
    target = stack.target()
    # The RECORDs of the files uv installs here, read in parallel (most installations match them).
    wanted = [(p, wheels.uv_choice(p, target)) for p in lock.packages.values() if p.wheels and env.get(p.name)]
    chosen = [(pkg, wheel) for pkg, wheel in wanted if wheel is not None]
    parallel.run_all(lambda pw: locked_record(stack, *pw), chosen, jobs=8)
    out: list[Difference] = []
    matched = 0
    if ".".join(env.version.split(".")[:2]) != stack.python:
        venv = Path(python).parent.parent
        out.append(Difference(PYTHON, "python", stack.python, env.version,
                              f"the stack is locked for Python {stack.python}; its wheels may not install here",
                              f"UV_PYTHON_DOWNLOADS=never uv venv --python {stack.python} {venv}"))
    for pkg in sorted(lock.packages.values(), key=lambda p: p.name):
        if pkg.source.get("virtual") or (wheel := wheels.uv_choice(pkg, target)) is None:
            continue
        difference = _package_difference(stack, python, pkg, wheel, env.get(pkg.name), verify_files)
        if difference is None:
            matched += 1
        else:
            out.append(difference)

    kernel = stack.kernel
    if kernel["from"] == "source":
        dist = env.get(kernel["package"])
        repair = (f"blackwell-stack kernel build --stack {stack.name} --src ./sglang --python {python} --out dist && "
                  f"uv pip install --python {python} --no-deps --reinstall dist/sgl_kernel-{kernel['version']}-*.whl")
        if dist is None:
            out.append(Difference(MISSING, kernel["package"], kernel["version"], None,
                                  "not installed (built from source, not in the lock)", repair))
        elif dist.version != kernel["version"]:
            out.append(Difference(VERSION, kernel["package"], kernel["version"], dist.version, f"{dist.version} installed", repair))
        elif any("manylinux" in t.platform for t in _installed_tags(dist)):
            out.append(Difference(FILE, kernel["package"], kernel["version"], dist.version,
                                  "the PyPI wheel (manylinux tags), which cannot load on this torch; the stack builds it "
                                  "from source", repair))
        else:
            matched += 1

    known = {canonicalize_name(n) for n in lock.packages} | {canonicalize_name(kernel["package"])}
    tools = {name: env.dists[name].version for name in TOOLS if name in env.dists and name not in known}
    for name in sorted(env.dists):
        if name not in known and name not in tools:
            dist = env.dists[name]
            out.append(Difference(EXTRA, name, None, dist.version, "installed, not in the lock",
                                  f"uv pip uninstall --python {python} {name}"))
    return Report(out, matched, tools, env.get(stack.data["versions_from_lock"]["sglang"]) is not None)


def run(stack: Stack, python: str, *, verify_files: bool, as_json: bool, verbose: bool = False) -> int:
    report = compare(stack, python, verify_files=verify_files)
    diffs = report.differences
    sync = stack.sync_command(Path(python).parent.parent)
    if as_json:
        output.dump_json({"stack": stack.name, "python": python, "serving_venv": report.serving,
                          "matched": report.matched, "tools": report.tools,
                          "differences": [asdict(d) for d in diffs]})
    elif not report.serving and not verbose:
        sglang = stack.data["versions_from_lock"]["sglang"]
        missing = max(0, sum(d.kind == MISSING for d in diffs) - 1)
        print(f"{python} is not a serving venv of the {stack.name} stack: {sglang} is not installed, nor "
              f"{output.counted(missing, 'more locked distribution')} ({output.counted(len(diffs), 'difference')} in "
              f"all; -v lists each)")
        steps = [d.repair for d in diffs if d.kind == PYTHON] + [sync]
        steps += [d.repair for d in diffs if d.name == stack.kernel["package"]]
        print("  make it one: " + "\n  then: ".join(steps))
    else:
        output.heading(f"{python} against stacks/{stack.name}/uv.lock")
        if diffs:
            output.table(["difference", "distribution", "locked", "installed", "detail"],
                         [[d.kind, d.name, d.locked, d.installed, d.detail] for d in diffs])
            print()
            for d in diffs:
                print(f"  repair {d.name}: {d.repair}")
        print(f"\n{CHECKED} against the lock: {output.counted(report.matched, 'distribution')} as locked, "
              f"{len(diffs)} differ"
              + ("" if verify_files else " (files compared through RECORD; --verify-files hashes them on disk too)"))
        if report.tools:
            print("beside the lock, as the README installs them: "
                  + ", ".join(f"{name} {version}" for name, version in report.tools.items()))
        if diffs:
            kernel = any(d.name == stack.kernel["package"] for d in diffs)
            print(f"every difference at once: {sync}" + ("; then the kernel's repair above" if kernel else ""))
    return int(ExitCode.CHECK_FAILED) if diffs else 0

