"""Python packages placed as pyproject.nix installs them in a build: one site-packages per package.

In a Nix build, every Python build input is its own store path
`<pkg>/lib/python3.12/site-packages`; pyproject.nix's output setup hook adds
each to NIX_PYPROJECT_PYTHONPATH and the build hook runs
`env PYTHONPATH=$NIX_PYPROJECT_PYTHONPATH:$PYTHONPATH uv build ...` with
nixpkgs' python312, whose own site-packages holds none of them. A locked
wheel's ELF files reach their libraries through the RUNPATH autoPatchelf
gave them (nix/fixups/wheel-libraries.nix: the directories of the other
locked wheels that hold them, then their own $ORIGIN entries and the
driver's directory); here the same RUNPATHs are written with patchelf
(rehearsal/autopatchelf.py) from the fixups nix evaluates, and nothing
sets LD_LIBRARY_PATH.

Packages are placed from their locked wheel (uv's choice on the stack's
target, the file Nix installs too): whole, or, for the CUDA library wheels,
only the libraries a given set of ELF files needs, transitively (what the
loader can reach), so that a rehearsal does not read gigabytes it never
loads. `skipped` names every package of the closure not placed, and why.
"""

from __future__ import annotations

import mmap
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack.data.lock import Lock
from blackwell_stack.data.stack import Stack
from blackwell_stack.formats import elf
from blackwell_stack.formats.remote_zip import RemoteWheel
from blackwell_stack.stacks import libraries
from support.rehearsal import autopatchelf, wheels
from support.rehearsal.components import Wheel

# A wheel's .data/<scheme>/ members (PEP 427): scripts go to bin/, purelib and platlib to site-packages.
_DATA = re.compile(r"^[^/]+\.data/(scripts|purelib|platlib)/(.+)$")
# Placed whole below this size; larger wheels only for the libraries they provide.
WHOLE_BELOW = 50 * 1024 * 1024


def site_packages(root: Path, name: str, version: str, python: str) -> Path:
    return root / f"{name}-{version}" / "lib" / f"python{python}" / "site-packages"


def needed(path: Path) -> list[str]:
    """DT_NEEDED of an ELF file, [] for anything else."""
    with open(path, "rb") as fh:
        if not elf.is_elf(fh.read(4)):
            return []
        fh.seek(0)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return list(elf.parse(mm, str(path)).needed)


@dataclass
class PythonSet:
    """Packages of one stack's lock (and extra wheels) placed under root, as a build sees them."""

    root: Path
    stack: Stack
    lock: Lock
    dirs: dict[str, Path] = field(default_factory=dict)  # package -> its site-packages
    skipped: dict[str, str] = field(default_factory=dict)
    patched: set[str] = field(default_factory=set)  # packages whose RUNPATHs autoPatchelf has written

    def _locked_wheel(self, name: str) -> Wheel:
        package, wheel = self.stack.chosen_wheels(self.lock)[name]
        remote = libraries.remote_file(wheel)
        return Wheel(name, package.version or "", remote.filename, remote.url, remote.sha256, remote.size,
                     "bdist_wheel")

    def add_wheel(self, wheel: Wheel, *, keep=lambda _name: True) -> Path:
        """Place the wheel's members for which keep(name) holds into the package's own prefix, as an
        installer does: the site-packages, and a `<name>.data/scripts/` member into bin/."""
        site = site_packages(self.root, wheel.name, wheel.version, self.stack.python)
        prefix = site.parents[2]
        for member in wheels.members(wheel, keep):
            data = _DATA.match(member.name)
            if data and data.group(1) == "scripts":
                wheels.place(member.path, prefix / "bin" / data.group(2), executable=True)
            else:
                wheels.place(member.path, site / (data.group(2) if data else member.name),
                             executable=member.executable)
        site.mkdir(parents=True, exist_ok=True)
        self.dirs[wheel.name] = site
        return site

    def add_locked(self, name: str) -> Path:
        return self.add_wheel(self._locked_wheel(name))

    def add_closure(self, name: str, *, libraries_for: Iterable[str] = ()) -> None:
        """name and its locked dependencies: small wheels whole, large ones for the libraries the packages
        in libraries_for (placed whole whatever their size) load, transitively; the rest skipped."""
        whole_anyway = set(libraries_for)
        large: dict[str, Wheel] = {}
        for dep in sorted(libraries.closure(self.lock, name)):
            wheel = self._locked_wheel(dep)
            if dep in whole_anyway or wheel.size < WHOLE_BELOW:
                self.add_wheel(wheel)
            else:
                large[dep] = wheel
        start = [p for dep in whole_anyway for p in self.dirs[dep].rglob("*.so*") if p.is_file()]
        self._library_closure(start, large)
        for dep, wheel in large.items():
            if dep not in self.dirs:
                self.skipped[dep] = (f"{wheel.filename} ({wheel.size // 2**20} MiB) provides no library that "
                                     f"{', '.join(sorted(whole_anyway))} loads")

    def _library_closure(self, start: list[Path], providers: dict[str, Wheel]) -> None:
        """Place the providers' libraries the start files need, and what those need, as the loader would find them."""
        index: dict[str, tuple[str, str]] = {}
        for dep, wheel in providers.items():
            with RemoteWheel(wheels.remote_file(wheel)) as remote:
                for member in remote.names:
                    base = member.rsplit("/", 1)[-1]
                    if ".so" in base:
                        index.setdefault(base, (dep, member))
        todo = [lib for path in start for lib in needed(path)]
        done: set[str] = set()
        while todo:
            lib = todo.pop()
            if lib in done or lib not in index:
                continue
            done.add(lib)
            dep, member = index[lib]
            site = self.add_wheel(providers[dep], keep=lambda n, m=member: n == m or ".dist-info/" in n)
            todo.extend(needed(site / member))

    def pythonpath(self) -> str:
        """NIX_PYPROJECT_PYTHONPATH of a build with every placed package as a build input."""
        return ":".join(str(d) for d in self.dirs.values())

    def post_install(self, fixups: dict[str, dict]) -> None:
        """The fixups' postInstall on every placed package that has one, as stdenv runs it with $out the package's
        prefix. It holds only `substituteInPlace FILE --replace-fail OLD NEW` (wheel-libraries.nix, by-name loads of
        the driver), modelled here with its failure when OLD is not in FILE; a placed file is a hard link into the
        cache, so the result is a new file."""
        for name, site in self.dirs.items():
            script = fixups.get(name, {}).get("postInstall", "")
            words = shlex.split(script.replace("\\\n", " "))
            while words:
                command, words = words[:5], words[5:]
                if len(command) != 5 or command[0] != "substituteInPlace" or command[2] != "--replace-fail":
                    raise AssertionError(f"{name}: the rehearsal models only substituteInPlace --replace-fail: {script}")
                path = Path(command[1].replace("$out", str(site.parents[2])))
                text = path.read_text()
                if command[3] not in text:
                    raise AssertionError(f"substituteInPlace {path}: --replace-fail {command[3]!r} is not in it")
                fresh = path.with_name(path.name + ".fixed")
                fresh.write_text(text.replace(command[3], command[4]))
                fresh.replace(path)

    def patch_runpaths(self, fixups: dict[str, dict], patchelf: str) -> None:
        """autoPatchelf with nix/fixups/wheel-libraries.nix's settings ({package: {preFixup, appendRunpaths,
        ignore}}) on every placed package not patched yet."""
        for name, site in self.dirs.items():
            if name in fixups and name not in self.patched:
                fixed = fixups[name]
                autopatchelf.patch(site, pre_fixup=fixed["preFixup"], append=fixed["appendRunpaths"],
                                   ignore=fixed["ignore"], patchelf=patchelf)
                self.patched.add(name)
