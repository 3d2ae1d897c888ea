"""`stack lock NAME`: make (or check) a stack's uv.lock with the pinned uv and Python 3.12.

The uv that writes a lock must write a format the locked uv2nix reads: the
stack names its uv version (stack.json `uv`, the uv-bin of the locked uv2nix
revision) and nothing else is used. The interpreter is Python 3.12 found on
this machine (uv must not download one: UV_PYTHON_DOWNLOADS=never). It is
found here, not by uv's `--python 3.12`: uv stops at the first python3.12 on
PATH, and a pyenv shim there that has no 3.12 selected fails uv outright.

Nothing is left half-written: the old uv.lock is restored when uv fails or
the new lock does not pass `validate` (every file with a sha256, the key
versions present, the source-built kernel kept out).

A stack whose pyproject takes some wheels from `./wheels/simple` (the
nightly) is locked against a directory holding them (`--wheels DIR`): they
are copied into the stack's wheels/ directory (not committed) and a PEP 503
index with their sha256 is written next to them. Not a uv flat index
(`format = "flat"`): uv 0.10.7 locks a local flat index's wheels without a
hash (measured), and every locked file needs its sha256.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from blackwell_stack import inputfiles, proc
from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import registry
from blackwell_stack.data.stack import Lock, Stack, load_lock
from blackwell_stack.errors import BuildError, CheckFailed, StackError, ToolchainError
from blackwell_stack.fileio import atomic_file, atomic_write_bytes
from blackwell_stack.hashes import sha256_file

KEPT_INDEX = "./wheels/simple"
UV_HINT = "install the uv the stack names: python3 -m pip install 'uv=={version}'"


def uv_binary(stack: Stack, uv: str | None = None) -> str:
    """The uv on PATH (or given), refused unless it is the stack's version."""
    path = uv or shutil.which("uv")
    if not path:
        raise ToolchainError("uv is not on PATH", UV_HINT.format(version=stack.uv_version))
    out = proc.run([path, "--version"], check=False, timeout=60).stdout.strip()
    m = re.match(r"uv (\S+)", out)
    if not m or m.group(1) != stack.uv_version:
        raise ToolchainError(
            f"{path} is {out or 'not uv'}; the {stack.name} stack is locked with uv {stack.uv_version} "
            "(the uv-bin of the locked uv2nix revision, whose lock format uv2nix reads)",
            UV_HINT.format(version=stack.uv_version),
        )
    return path


def _python_version(path: str) -> str | None:
    try:
        r = proc.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=False, timeout=60)
    except StackError:  # cannot be started, or hung
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _pyenv_candidates(version: str) -> list[str]:
    pyenv = shutil.which("pyenv")
    if not pyenv:
        return []
    try:
        root = proc.run([pyenv, "root"], check=False, timeout=60).stdout.strip()
        listed = proc.run([pyenv, "versions", "--bare"], check=False, timeout=60).stdout.split()
    except StackError:
        return []
    # Newest patch release first, by number (3.12.10 before 3.12.9).
    ours = [v for v in listed if v == version or (v.startswith(version + ".") and v[len(version) + 1:].isdigit())]
    ours.sort(key=lambda v: int(v[len(version) + 1:] or 0), reverse=True)
    return [f"{root}/versions/{v}/bin/python{version}" for v in ours]


def find_python(version: str, given: str | None = None) -> str:
    """An interpreter of `version` ("3.12"): the one given, `python3.12` on PATH, or a pyenv install."""
    candidates = [given] if given else [c for c in [shutil.which(f"python{version}")] if c] + _pyenv_candidates(version)
    for candidate in candidates:
        if candidate and _python_version(candidate) == version:
            return candidate
    where = f"{given} is not a working Python {version}" if given else f"no working python{version} on PATH or in pyenv"
    raise ToolchainError(f"{where}; uv locks the stack for Python {version} and must not download one",
                         f"install Python {version} and pass it: --python /path/to/python{version}")


def kept_index_used(stack: Stack) -> bool:
    """Whether the stack's pyproject takes some wheels from ./wheels/simple."""
    pyproject = registry.load("stack-pyproject", file=stack.path / "pyproject.toml")
    return any(index.get("url") == KEPT_INDEX for index in pyproject.get("tool", {}).get("uv", {}).get("index", []))


def write_kept_index(stack: Stack, source: Path) -> list[str]:
    """Copy DIR's wheels into stacks/NAME/wheels/ and write a PEP 503 index of them; the file names."""
    if not source.is_dir():
        raise StackError(f"--wheels {source}: not a directory", "pass the directory that holds the kept wheels")
    found = sorted(source.glob("*.whl"))
    if not found:
        raise StackError(f"--wheels {source}: no .whl files there",
                         "put the kept torch, triton and torchvision wheels there (or repack them with "
                         "`blackwell-stack pins rescue DIST --from-venv VENV`)")
    for wheel in found:  # all before any is read: a FIFO named like a wheel would block the read forever
        inputfiles.regular_file(wheel, "--wheels:", hint=f"keep only the wheel files themselves in {source}")
    target = stack.path / "wheels"
    projects: dict[str, list[tuple[str, str]]] = {}
    for wheel in found:
        try:
            name = canonicalize_name(parse_wheel_filename(wheel.name)[0])
        except InvalidWheelFilename as exc:
            raise StackError(f"{wheel}: not a wheel file name ({exc})", "keep the wheels' original file names") from None
        dest = target / wheel.name
        digest = sha256_file(wheel)
        if not (dest.is_file() and dest.stat().st_size == wheel.stat().st_size and sha256_file(dest) == digest):
            with atomic_file(dest, suffix=".part") as out, open(wheel, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
        projects.setdefault(str(name), []).append((wheel.name, digest))
    for project, files in projects.items():
        links = "".join(f'<a href="../../{html.escape(f)}#sha256={h}">{html.escape(f)}</a>\n' for f, h in files)
        atomic_write_bytes(target / "simple" / project / "index.html",
                           f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode())
    return [w.name for w in found]


def validate(stack: Stack, lock: Lock) -> None:
    """Refuse a lock that the stack cannot be built from."""
    problems = []
    for pkg in lock.packages.values():
        if pkg.source.get("virtual"):
            continue
        for artifact in pkg.artifacts():
            if lockfile.sha256_of(artifact) is None:
                ref = artifact.get("url") or artifact.get("path") or "?"
                problems.append(f"{pkg.name} {pkg.version}: {ref} has no sha256")
        if not pkg.wheels:
            problems.append(f"{pkg.name} {pkg.version}: no wheel (the stacks are wheel-only)")
    for key, package in stack.data["versions_from_lock"].items():
        if lock.get(package) is None:
            problems.append(f"the {key} version is read from {package}, which is not locked")
    kernel = stack.kernel
    if kernel["from"] == "source" and lock.get(kernel["package"]) is not None:
        problems.append(f"{kernel['package']} is built from source but the lock has it "
                        "(keep it in [tool.uv] exclude-dependencies)")
    if kernel["from"] == "lock" and lock.get(kernel["package"]) is None:
        problems.append(f"{kernel['package']} comes from the lock but the lock does not have it")
    if problems:
        raise StackError(f"the new lock of the {stack.name} stack cannot be used:\n  " + "\n  ".join(problems),
                         "fix the stack's pyproject.toml (the old uv.lock was left as it was)")


def lock(stack: Stack, *, python: str | None = None, uv: str | None = None, wheels: Path | None = None,
         check: bool = False) -> Lock | None:
    """Run `uv lock` (or `uv lock --check`) for the stack; the new lock, validated."""
    uv_path = uv_binary(stack, uv)
    interpreter = find_python(stack.python, python)
    if kept_index_used(stack):
        if wheels is not None:
            write_kept_index(stack, wheels)
        elif not (stack.path / "wheels" / "simple").is_dir():
            raise StackError(f"the {stack.name} stack takes some wheels from a local directory and there is none yet",
                             f"run `{stack.lock_command}`")
    elif wheels is not None:
        raise StackError(f"the {stack.name} stack takes every wheel from PyPI; --wheels is for stacks with kept wheels",
                         f"run `blackwell-stack stack lock {stack.name}`")
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    argv = [uv_path, "lock", "--python", interpreter, "--project", str(stack.path)]
    if check:
        argv.append("--check")
    before = stack.lock_path.read_bytes() if stack.locked else None
    # Whatever stops it (uv failing or hanging, a new lock refused, Ctrl-C or SIGTERM while uv wrote, which
    # subprocess.run answers by killing it mid-write), the old uv.lock is put back.
    try:
        try:
            # In the stack's directory: uv resolves a relative index URL (./wheels/simple) against the working
            # directory.
            result = proc.run(argv, env=env, timeout=1800, check=False, cwd=stack.path)
        except StackError as exc:  # it hung (or could not be started after all)
            raise type(exc)(exc.message,
                            "check the network and try again; the old uv.lock was left as it was") from None
        tail = "\n".join(result.stderr.strip().splitlines()[-25:])
        if result.returncode != 0 and check:
            raise CheckFailed(f"stacks/{stack.name}/uv.lock is not current with its pyproject.toml:\n{tail}",
                              f"lock it again: {stack.lock_command}")
        if result.returncode != 0:
            raise BuildError(f"uv could not lock the {stack.name} stack:\n{tail}",
                             "fix the conflict in the stack's pyproject.toml; the old uv.lock was left as it was")
        if check:
            return None
        new = load_lock(stack.lock_path)
        validate(stack, new)
    except (StackError, KeyboardInterrupt):
        if before is None:
            stack.lock_path.unlink(missing_ok=True)
        elif not stack.lock_path.exists() or stack.lock_path.read_bytes() != before:
            atomic_write_bytes(stack.lock_path, before)
        raise
    return new
