"""The lock's glibc headers, and the host compiler made to use them: what nixpkgs' backendStdenv.cc compiles with.

nixpkgs' gcc is built with glibc's headers as its system headers
(--with-native-system-header-dir), so in a Nix build every compile, nvcc's
host passes included, sees the lock's glibc (2.42) where a host compile sees
the host's (2.36 on Debian 12, which has no C23 `rsqrt` at all). Debian has
no 2.42: tests/support/rehearsal/tools.json names the nearest newer libc6-dev, from
Debian's development suite, and why its declarations are the same.

- `headers`: that package's usr/include, fetched with apt-get through a
  private apt state (its own sources list and index under the user cache
  directory; the host's apt is not touched), checked against the sha256 of
  the signed index, cached by that hash, and unpacked with dpkg -x.
- `compiler`: bin/{cc,c++,gcc,g++} that run the host's compiler with the
  system include directories it reports for itself, the glibc ones replaced
  by the package's (-nostdinc, then the same order). The host's own
  /usr/include stays last (-idirafter) for the Linux kernel's headers
  (linux/, asm/), which come from another package. Linking is the host's.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import BuildError, ToolchainError
from blackwell_stack.hashes import sha256_file
from blackwell_stack.paths import cache_dir

_DEBIAN = "http://deb.debian.org/debian"
_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
_HOST_GLIBC_DIRS = ("/usr/include/x86_64-linux-gnu", "/usr/include")


@dataclass(frozen=True)
class Package:
    """A Debian package pinned by version and sha256 (tests/support/rehearsal/tools.json glibc.debian, driver)."""

    name: str
    version: str
    suite: str
    sha256: str
    component: str = "main"


def _apt(state: Path, suite: str, component: str) -> list[str]:
    """apt options for a private state: its own sources list, index, cache and (empty) dpkg status."""
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    sources = state / "sources.list"
    sources.write_text(f"deb [signed-by={_KEYRING}] {_DEBIAN} {suite} {component}\n")
    status = state / "status"
    status.touch()
    return ["-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Etc::SourceList={sources}",
            "-o", "Dir::Etc::SourceParts=/nonexistent", "-o", f"Dir::Cache={state / 'cache'}",
            "-o", f"Dir::State::status={status}", "-o", "APT::Architecture=amd64"]


def _indexed_sha256(options: list[str], package: Package) -> str | None:
    shown = proc.run(["apt-cache", *options, "show", f"{package.name}={package.version}"], check=False, timeout=120)
    m = re.search(r"^SHA256: ([0-9a-f]{64})$", shown.stdout, re.MULTILINE)
    return m.group(1) if shown.returncode == 0 and m else None


def fetch(package: Package) -> Path:
    """The .deb, from the user cache (by sha256) or downloaded through the private apt state."""
    debs = cache_dir("rehearsal", "debian-by-sha256")
    cached = debs / f"{package.sha256}.deb"
    if cached.is_file() and sha256_file(cached) == package.sha256:
        return cached
    for tool in ("apt-get", "apt-cache", "dpkg"):
        proc.require(tool, "the lock's glibc headers are Debian's libc6-dev: run the rehearsal on Debian or Ubuntu")
    state = cache_dir("rehearsal", f"apt-debian-{package.suite}" + ("" if package.component == "main" else f"-{package.component}"))
    options = _apt(state, package.suite, package.component)
    indexed = _indexed_sha256(options, package)
    if indexed is None:
        try:
            proc.run(["apt-get", *options, "update"], timeout=600)
        except BuildError as exc:
            raise ToolchainError(f"apt-get cannot read Debian {package.suite}'s index: {exc.message}",
                                 f"check that {_DEBIAN} is reachable") from None
        indexed = _indexed_sha256(options, package)
    if indexed is None:
        raise ToolchainError(f"Debian {package.suite} no longer has {package.name} {package.version}",
                             "pick the suite's current version (apt-cache show) and record its version and sha256 "
                             "in tests/support/rehearsal/tools.json, checked to declare the same functions")
    if indexed != package.sha256:
        raise ToolchainError(f"Debian's index gives {package.name} {package.version} the sha256 {indexed}, "
                             f"tests/support/rehearsal/tools.json {package.sha256}", "find out which is right before using it")
    work = state / "download"
    work.mkdir(exist_ok=True)
    for old in work.glob("*.deb"):
        old.unlink()
    # apt-get download checks the file against the signed index before keeping it.
    proc.run(["apt-get", *options, "download", f"{package.name}={package.version}"], cwd=work, timeout=600)
    found = sorted(work.glob(f"{package.name}_*.deb"))
    if len(found) != 1 or sha256_file(found[0]) != package.sha256:
        raise ToolchainError(f"apt-get download {package.name}={package.version} left no file with the pinned sha256")
    partial = debs / f"{package.sha256}.deb.partial"
    found[0].replace(partial)
    partial.replace(cached)
    return cached


def headers(root: Path, package: Package) -> Path:
    """The package unpacked under root; its usr/include."""
    prefix = root / f"{package.name}-{package.version}"
    if not (prefix / "usr" / "include" / "math.h").is_file():
        prefix.mkdir(parents=True, exist_ok=True)
        proc.run(["dpkg", "-x", str(fetch(package)), str(prefix)], timeout=300)
    include = prefix / "usr" / "include"
    if not (include / "math.h").is_file():
        raise ToolchainError(f"{package.name} {package.version} unpacked without usr/include/math.h at {prefix}")
    return include


def search_dirs(compiler: str, language: str) -> list[str]:
    """The `#include <...>` directories the compiler searches by default for a language ("c" or "c++")."""
    result = proc.run([compiler, f"-x{language}", "-E", "-v", "-"], input="", check=False, timeout=60)
    text = result.stderr
    start, end = text.find("#include <...> search starts here:"), text.find("End of search list.")
    if result.returncode != 0 or start < 0 or end < start:
        raise ToolchainError(f"{compiler} -E -v does not list its include directories")
    return [line.strip() for line in text[start:end].splitlines()[1:] if line.strip()]


def _flags(dirs: list[str], include: Path) -> list[str]:
    glibc = [str(include / "x86_64-linux-gnu"), str(include)]
    kept = [d for d in dirs if d not in _HOST_GLIBC_DIRS]
    return ["-nostdinc", *[f for d in kept + glibc for f in ("-isystem", d)],
            *[f for d in _HOST_GLIBC_DIRS for f in ("-idirafter", d)]]


def compiler(directory: Path, include: Path, real_bin: Path = Path("/usr/bin")) -> Path:
    """bin/{cc,c++,gcc,g++} compiling against `include` (a glibc's usr/include); the bin directory.

    The flags come after the caller's, so that its own -I and -isystem directories are searched first, as
    they are before a compiler's built-in ones. nvcc runs `gcc -x c++`: a C++ compile is told by the
    program's name or by `-x c++`."""
    c_flags = shlex.join(_flags(search_dirs(str(real_bin / "gcc"), "c"), include))
    cxx_flags = shlex.join(_flags(search_dirs(str(real_bin / "g++"), "c++"), include))
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, cxx in (("cc", False), ("gcc", False), ("c++", True), ("g++", True)):
        detect = "" if cxx else 'for a in "$@"; do case "$a" in -xc++|c++) lang=c++;; esac; done\n'
        script = (f"#!/bin/bash\nlang={'c++' if cxx else 'c'}\n{detect}"
                  f'if [[ $lang == c++ ]]; then flags=({cxx_flags}); else flags=({c_flags}); fi\n'
                  f'exec {real_bin / name} "$@" "${{flags[@]}}"\n')
        path = bin_dir / name
        path.write_text(script)
        path.chmod(0o755)
    return bin_dir
