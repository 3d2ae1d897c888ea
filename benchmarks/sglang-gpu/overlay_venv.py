"""A venv that is the machine's venv with some of the stable lock's wheels in place of its own packages.

    python3 overlay_venv.py BASE_PYTHON DEST LOCK WHEEL...

Every entry of BASE_PYTHON's site-packages is linked into DEST's, except what the wheels install: their top-level
packages, the same-named sub-packages of a namespace directory (nvidia/nccl of nvidia-nccl-cu13 beside the
machine's other nvidia/*), and the dist-info of the same projects (so pip never uninstalls through a link). cmake
and ninja beside BASE_PYTHON are linked beside DEST's. Each wheel is checked against LOCK's sha256 first, then
all are installed with pip --no-deps. The machine's other packages, its CUDA libraries among them, serve the rest.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

NAMESPACES = {"nvidia"}  # shared by many wheels: linked sub-package by sub-package


def locked_hashes(lock: Path) -> dict[str, str]:
    data = tomllib.loads(lock.read_text())
    return {w["url"].rsplit("/", 1)[1]: w["hash"] for p in data["package"] for w in p.get("wheels", [])}


def project(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def provided(wheel: Path) -> tuple[set[str], set[str]]:
    """(top-level entries, namespace sub-entries as 'nvidia/nccl') the wheel installs."""
    tops, subs = set(), set()
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            parts = name.split("/")
            if parts[0].endswith(".dist-info") or parts[0].endswith(".data"):
                continue
            if parts[0] in NAMESPACES and len(parts) > 2:
                subs.add(f"{parts[0]}/{parts[1]}")
            else:
                tops.add(parts[0])
    return tops, subs


def main(base_python: str, dest: str, lock: str, *wheels: str) -> int:
    hashes = locked_hashes(Path(lock))
    for wheel in map(Path, wheels):
        digest = "sha256:" + hashlib.sha256(wheel.read_bytes()).hexdigest()
        if hashes.get(wheel.name) != digest:
            print(f"{wheel.name}: {digest} is not the lock's {hashes.get(wheel.name)}", file=sys.stderr)
            return 1
    base_site = Path(subprocess.run([base_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                    capture_output=True, text=True, check=True).stdout.strip())
    subprocess.run([base_python, "-m", "venv", "--without-pip", dest], check=True)
    site = next(Path(dest).glob("lib/python3*/site-packages"))
    tops, subs, projects = set(), set(), set()
    for wheel in map(Path, wheels):
        t, s = provided(wheel)
        tops |= t
        subs |= s
        projects.add(project(wheel.name.split("-")[0]))
    for entry in sorted(base_site.iterdir()):
        if entry.name in tops or entry.name == "__pycache__":
            continue
        if entry.name.endswith(".dist-info") and project(entry.name.split("-")[0]) in projects:
            continue
        if entry.name in NAMESPACES and entry.is_dir():
            (site / entry.name).mkdir()
            for sub in sorted(entry.iterdir()):
                if f"{entry.name}/{sub.name}" not in subs:
                    (site / entry.name / sub.name).symlink_to(sub)
            continue
        (site / entry.name).symlink_to(entry)
    for tool in ("cmake", "ninja"):
        found = Path(base_python).parent / tool
        if found.exists():
            (Path(dest) / "bin" / tool).symlink_to(found)
    subprocess.run([f"{dest}/bin/python3", "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    *wheels], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
