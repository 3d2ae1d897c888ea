"""A torch environment laid out as uv2nix lays out a stack's wheels, with the RUNPATHs our fixups write.

    python benchmarks/driver-runpath/layout.py SITE_PACKAGES OUT --policy {needs-driver,every-elf}
        [--driver-dir /run/opengl-driver/lib] [--patchelf PATCHELF]

Each distribution of SITE_PACKAGES that torch's CUDA side is made of (torch and the nvidia-* wheels)
is copied into its own prefix, OUT/<name>/lib/python3.12/site-packages, as each wheel is its own store
path in Nix. Then every ELF gets the RUNPATH autoPatchelf and nix/fixups/wheel-libraries.nix give it:
the directories where each library it DT_NEEDs was found (in its own distribution or another copied
one), then the wheel's own $ORIGIN entries (appendRunpaths of origin_runpaths), then the driver's
directory, for which distributions depends on the policy:

- needs-driver: only a distribution with a library that DT_NEEDs libcuda.so.1 or libnvidia-ml.so.1
  (the fixups before the driver fix: `lib.optional (driver != [ ])`);
- every-elf: every distribution that carries an ELF (the fixups now), because NVIDIA's libraries
  dlopen the driver: libcudart.so.13, libcublasLt.so.13 and libcusparseLt.so.0 need no driver at link
  time, and glibc searches the RUNPATH of the object that calls dlopen, not its dependents'.

Writes OUT/pythonpath (the prefixes' site-packages, in order) and OUT/runpaths.json (every ELF's new
RUNPATH).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from blackwell_stack.errors import StackError  # noqa: E402
from blackwell_stack.formats import elf  # noqa: E402

DRIVER_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == elf.ELF_MAGIC
    except OSError:
        return False


def copy_distributions(site: Path, out: Path) -> dict[str, Path]:
    """torch and the nvidia-* distributions, each into its own prefix; name -> its site-packages."""
    prefixes: dict[str, Path] = {}
    for dist in importlib.metadata.distributions(path=[str(site)]):
        name = dist.metadata["Name"].lower()
        if name != "torch" and not name.startswith("nvidia-"):
            continue
        dest = out / name / "lib" / PY / "site-packages"
        for file in dist.files or []:
            source = site / file
            if not source.is_file() or ".." in Path(file).parts:
                continue
            target = dest / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        prefixes[name] = dest
    return prefixes


def elves(prefixes: dict[str, Path]) -> dict[str, list[Path]]:
    return {name: [p for p in sorted(site.rglob("*")) if p.is_file() and not p.is_symlink() and _is_elf(p)]
            for name, site in prefixes.items()}


def runpaths(prefixes: dict[str, Path], found: dict[str, list[Path]], policy: str, driver_dir: str) -> dict[str, str]:
    """ELF path -> the RUNPATH the fixups give it."""
    where: dict[str, list[Path]] = {}  # library file name -> directories that have it, copied distributions only
    for files in found.values():
        for path in files:
            where.setdefault(path.name, []).append(path.parent)
    out: dict[str, str] = {}
    for files in found.values():
        parsed = {}
        for path in files:
            try:
                parsed[path] = elf.parse(path.read_bytes(), str(path))
            except StackError:
                continue
        needs_driver = any(lib in DRIVER_LIBRARIES for e in parsed.values() for lib in e.needed)
        # origin_runpaths: the wheel's own $ORIGIN entries, as stacks/<stack>/wheels.json records them per wheel.
        origins = sorted({entry for e in parsed.values() for entry in e.runpath for entry in entry.split(":")
                          if entry.startswith("$ORIGIN")})
        for path, e in parsed.items():
            dirs: list[str] = []
            for lib in e.needed:
                for candidate in where.get(lib, []):
                    if str(candidate) not in dirs:
                        dirs.append(str(candidate))
                        break
            dirs += [o for o in origins if o not in dirs]
            if policy == "every-elf" or needs_driver:
                dirs.append(driver_dir)
            out[str(path)] = ":".join(dirs)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("site", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--policy", choices=("needs-driver", "every-elf"), required=True)
    p.add_argument("--driver-dir", default="/run/opengl-driver/lib")
    p.add_argument("--patchelf", default=shutil.which("patchelf") or "patchelf")
    args = p.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    prefixes = copy_distributions(args.site, args.out)
    found = elves(prefixes)
    new = runpaths(prefixes, found, args.policy, args.driver_dir)
    for path, value in new.items():
        os.chmod(path, os.stat(path).st_mode | 0o200)
        subprocess.run([args.patchelf, "--set-rpath", value, path], check=True)
    (args.out / "runpaths.json").write_text(json.dumps(new, indent=1))
    (args.out / "pythonpath").write_text(":".join(str(s) for s in prefixes.values()))
    print(f"{len(prefixes)} distributions, {len(new)} ELF files, policy {args.policy}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
