"""`pins update`: resolve a dated torch nightly (and its triton) or PyPI releases, hash them, write the pins.

Every file is downloaded and hashed before the pins file is touched; the file
is then replaced in one atomic rename, so a failure leaves the old pins intact.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack import pypi
from blackwell_stack.data.pins import ANY_KEY, SCHEMA_VERSION, load_pins, validate, wheel_key
from blackwell_stack.download import download
from blackwell_stack.errors import StackError
from blackwell_stack.fileio import atomic_write_json
from blackwell_stack.hashes import hex_to_sri, sha256_file
from blackwell_stack.paths import cache_dir, repo_root
from blackwell_stack.pins import index, wheels

NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/{cuda}"
# Packages that have carried torch nightlies' triton pin (renamed by pytorch PR #169888).
TRITON_NAMES = ("triton", "pytorch-triton")


@dataclass
class Resolved:
    filename: str
    url: str
    index_sha256: str | None


def _today() -> str:
    return dt.date.today().isoformat()


def _fetch_and_hash(res: Resolved, *, source: str) -> dict:
    """Download (or reuse a verified cached copy) and return a wheel pin entry."""
    dest = cache_dir("wheels") / res.filename
    if dest.exists() and res.index_sha256 and sha256_file(dest) == res.index_sha256:
        digest = res.index_sha256
    else:
        digest = download(res.url, dest, expected_sha256=res.index_sha256)
    how = f"sha256 computed by `blackwell-stack pins update` from a download of {source} on {_today()}"
    if res.index_sha256:
        how += " (equal to the sha256 the index publishes)"
    return {
        "filename": res.filename,
        "url": res.url,
        "hash": hex_to_sri(digest),
        "hash_source": how,
        "hash_checked": "computed",
        "verified": True,
        "reason": None,
        "_path": str(dest),
    }


def _strip_private(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if not k.startswith("_")}


def _pick(files: list[index.IndexFile], package: str, version, system: str, python: str, where: str) -> Resolved:
    found = []
    for f in files:
        parsed = wheels.parse(f.filename)
        if parsed and parsed[1] == version and wheels.matches(f.filename, system, python):
            found.append(f)
    if not found:
        raise StackError(
            f"{where} has {package} {version} but no wheel for {system} and Python {python}",
            "pick another --python, or check that this build exists for your platform",
        )
    # Prefer the most specific (cpXY over abi3/py3), then the newest manylinux tag: stable across runs.
    found.sort(key=lambda f: (not f.filename.split("-")[-3].startswith("cp"), f.filename), reverse=False)
    best = found[0]
    return Resolved(best.filename, best.url, best.sha256)


def nearest_dates(available: set[str], wanted: str, n: int = 5) -> list[str]:
    target = dt.datetime.strptime(wanted, "%Y%m%d").date()
    return sorted(available, key=lambda d: (abs((dt.datetime.strptime(d, "%Y%m%d").date() - target).days), d))[:n]


def update_torch(
    pins_path: Path,
    *,
    date: str,
    cuda: str = "cu130",
    pythons: list[str],
    systems: list[str],
    index_url: str | None = None,
) -> dict:
    """Pin the torch nightly of `date` for `cuda` and the triton it requires; return the new data."""
    try:
        dt.datetime.strptime(date, "%Y%m%d")
    except ValueError as exc:
        raise StackError(f"--date {date!r} is not a date", "write it as YYYYMMDD, e.g. --date 20260307") from exc
    index_url = index_url or NIGHTLY_INDEX.format(cuda=cuda)
    files = index.list_files(index_url, "torch")

    by_date: dict[str, set] = {}
    for f in files:
        parsed = wheels.parse(f.filename)
        if parsed is None or parsed[1].local != cuda:
            continue
        d = wheels.nightly_date(parsed[1])
        if d:
            by_date.setdefault(d, set()).add(parsed[1])
    if date not in by_date:
        near = nearest_dates(set(by_date), date)
        listed = ", ".join(near) if near else "none"
        raise StackError(
            f"no torch nightly for {date} ({cuda}) on {index_url}; nearest dates there: {listed}",
            "pick one of those with --date; the nightly index keeps only the newest 60 builds. "
            "If you kept the wheel, add it with `blackwell-stack pins vendor FILE --record`",
        )
    versions = sorted(by_date[date])
    version = versions[-1]  # a day has one nightly; take the newest if a mirror has more

    torch_entries: dict[str, dict] = {}
    for system in systems:
        for py in pythons:
            res = _pick(files, "torch", version, system, py, index_url)
            torch_entries[wheel_key(system, py)] = _fetch_and_hash(res, source=res.url)

    first = next(iter(torch_entries.values()))
    triton_name, triton_version = None, None
    for name in TRITON_NAMES:
        triton_version = wheels.requirement_pin(first["_path"], name)
        if triton_version:
            triton_name = name
            break
    triton = None
    if triton_name:
        from packaging.version import Version

        tfiles = index.list_files(index_url, triton_name)
        assert triton_version is not None  # found together with triton_name
        tv = Version(triton_version)
        t_entries = {}
        for system in systems:
            for py in pythons:
                res = _pick(tfiles, triton_name, tv, system, py, index_url)
                t_entries[wheel_key(system, py)] = _strip_private(_fetch_and_hash(res, source=res.url))
        triton = {
            "version": triton_version,
            "distribution": triton_name,
            "requirement": f"{triton_name}=={triton_version} (Requires-Dist of the torch wheel)",
            "wheels": t_entries,
        }

    py_args = " ".join(f"--python {p}" for p in pythons)
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "description": _old_description(pins_path),
        "update_command": f"blackwell-stack pins update torch --date {date} --cuda {cuda} {py_args}",
        "index_url": index_url,
        "date": date,
        "cuda": cuda,
        "packages": {"torch": {"version": str(version), "wheels": {k: _strip_private(v) for k, v in torch_entries.items()}}},
    }
    if triton:
        data["packages"]["triton"] = triton
    validate(data, pins_path)
    atomic_write_json(pins_path, data)
    return data


def _old_description(path: Path) -> str:
    try:
        return load_pins(path).data.get("description", "")
    except StackError:
        return "PyTorch nightly and the triton it requires, pinned by `blackwell-stack pins update torch`."


def update_pypi(
    pins_path: Path,
    specs: list[str],
    *,
    pythons: list[str],
    systems: list[str],
    index_json: str = pypi.PYPI_JSON,
) -> dict:
    """Pin PyPI releases (`name==version`) with hashes computed from downloads, checked against PyPI's."""
    new_packages = {}
    for spec in specs:
        name, sep, version = spec.partition("==")
        if not sep or not name or not version:
            raise StackError(f"{spec!r} is not an exact requirement", "write NAME==VERSION, e.g. sglang==0.5.9")
        files = [f for f in pypi.release_files(name, version, index_json=index_json) if f.filename.endswith(".whl")]
        if not files:
            raise StackError(f"{name}=={version} has no wheels on PyPI", "pin a version that publishes wheels")
        entries = {}
        pure = [f for f in files if wheels.is_pure(f.filename)]
        if pure:
            f = pure[0]
            entry = _fetch_and_hash(Resolved(f.filename, f.url, f.sha256), source=f.url)
            entry["hash_source"] = f"PyPI's registry sha256 for {f.filename}, checked by downloading it on {_today()}"
            entry["hash_checked"] = "registry"
            entries[ANY_KEY] = _strip_private(entry)
        else:
            for system in systems:
                for py in pythons:
                    cands = sorted((f for f in files if wheels.matches(f.filename, system, py)), key=lambda f: f.filename)
                    if not cands:
                        raise StackError(f"{name}=={version} has no wheel for {system} and Python {py} on PyPI")
                    f = cands[0]
                    entry = _fetch_and_hash(Resolved(f.filename, f.url, f.sha256), source=f.url)
                    entry["hash_source"] = f"PyPI's registry sha256 for {f.filename}, checked by downloading it on {_today()}"
                    entry["hash_checked"] = "registry"
                    entries[wheel_key(system, py)] = _strip_private(entry)
        new_packages[name] = {"version": version, "wheels": entries}

    if pins_path.exists():
        data = load_pins(pins_path).data
    else:
        data = {"schema_version": SCHEMA_VERSION, "description": "PyPI wheels pinned by `blackwell-stack pins update pypi`.",
                "update_command": "", "packages": {}}
    data["packages"].update(new_packages)
    all_specs = " ".join(f"{n}=={p['version']}" for n, p in sorted(data["packages"].items()))
    data["update_command"] = f"blackwell-stack pins update pypi {all_specs} --file {_display(pins_path)}"
    validate(data, pins_path)
    atomic_write_json(pins_path, data)
    return data


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root().resolve()))
    except (StackError, ValueError):
        return str(path)
