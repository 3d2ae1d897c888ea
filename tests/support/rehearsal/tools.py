"""Stand-ins for the nixpkgs tools a derivation lists that no PyPI wheel of nixpkgs' CUDA set covers.

- CMake: Kitware's build of nixpkgs' release, from its PyPI wheel
  (tests/support/rehearsal/tools.json), placed as `<root>/cmake-<version>/bin`.
- numactl: Debian's libnuma-dev and libnuma1, fetched with `apt-get download`
  (apt checks them against the signed archive index) into the user cache and
  unpacked with `dpkg -x`; the prefix is `<root>/numactl-debian/usr`.
- the NVIDIA driver's libcuda.so.1 and libnvidia-ml.so.1: Debian's packages
  of NVIDIA's driver, pinned by sha256 and fetched like the lock's glibc
  headers (support/rehearsal/glibc.py); `<root>/driver-debian/lib` holds them
  as a driver link's lib/ does.

What each differs in from nixpkgs' package is in tools.json.
"""

from __future__ import annotations

import os
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import BuildError, ToolchainError
from blackwell_stack.paths import cache_dir
from support.rehearsal import glibc, wheels
from support.rehearsal.components import Wheel

_CMAKE_DATA = "cmake/data/"


def cmake(root: Path, wheel: Wheel) -> Path:
    """The bin directory of the CMake release in wheel, placed under root."""
    prefix = root / f"cmake-{wheel.version}"
    for member in wheels.members(wheel, lambda n: n.startswith(_CMAKE_DATA)):
        wheels.place(member.path, prefix / member.name[len(_CMAKE_DATA):], executable=member.executable)
    return prefix / "bin"


def numactl(root: Path, packages: list[str]) -> Path:
    """A prefix with numa.h and libnuma.so, unpacked from Debian's packages."""
    for tool in ("apt-get", "dpkg"):
        proc.require(tool, "the numactl stand-in is Debian's libnuma-dev: run the rehearsal on Debian or Ubuntu")
    debs = cache_dir("rehearsal", "debian")
    if not all(list(debs.glob(f"{name}_*.deb")) for name in packages):
        # apt-get download writes into the working directory; it verifies each file against the archive index.
        try:
            proc.run(["apt-get", "download", *packages], cwd=debs, timeout=600)
        except BuildError as exc:
            raise ToolchainError(f"apt-get cannot download {', '.join(packages)}: {exc.message}",
                                 "run `apt-get update` (as root) so that apt knows them") from None
    prefix = root / "numactl-debian"
    prefix.mkdir(parents=True, exist_ok=True)
    for name in packages:
        found = sorted(debs.glob(f"{name}_*.deb"))
        if not found:
            raise ToolchainError(f"apt-get download {name} left no {name}_*.deb in {debs}",
                                 "run `apt-get update` (as root) so that apt knows the package")
        proc.run(["dpkg", "-x", str(found[-1]), str(prefix)], timeout=300)
    if not (prefix / "usr" / "include" / "numa.h").is_file():
        raise ToolchainError(f"{prefix} has no usr/include/numa.h after unpacking {', '.join(packages)}")
    return prefix / "usr"


def driver(root: Path, packages: list[glibc.Package]) -> Path:
    """A driver link (its lib/ holds libcuda.so.1, libnvidia-ml.so.1) from Debian's packages of NVIDIA's driver."""
    prefix = root / "driver-debian"
    unpacked = prefix / "unpacked"
    unpacked.mkdir(parents=True, exist_ok=True)
    for package in packages:
        proc.run(["dpkg", "-x", str(glibc.fetch(package)), str(unpacked)], timeout=300)
    found = unpacked / "usr" / "lib" / "x86_64-linux-gnu" / "nvidia" / "current"
    for name in ("libcuda.so.1", "libnvidia-ml.so.1"):
        if not (found / name).is_file():
            raise ToolchainError(f"{found} has no {name} after unpacking {', '.join(p.name for p in packages)}")
    lib = prefix / "lib"
    if not lib.exists():
        lib.symlink_to(found)
    return prefix


def path_of(*dirs: Path | str) -> str:
    """A PATH of the given directories, then the host's /usr/bin and /bin (coreutils, bash, the host compiler)."""
    return os.pathsep.join([*(str(d) for d in dirs), "/usr/bin", "/bin"])
