"""CUDA components laid out as nixpkgs lays them out, from NVIDIA's PyPI wheels.

For each component (tests/support/rehearsal/cuda-13.0.2.json) the wheel's files under
`nvidia/cu13/` are placed as nixpkgs' package would place its archive's:

- the package file's prePatch renames and drops (`moves`, `drop`: CCCL's
  include/cccl un-nested, NVVM's nvvm/ made top-level);
- the split into outputs that buildRedist's install phase makes
  (pkgs/development/cuda-modules/buildRedist/default.nix): everything in
  `out`, then for each further output, in buildRedist's order, its patterns
  moved out of whichever output holds them (bin/, include/, lib/ and lib64/,
  */*.pc and */*.cmake, */*.a, stubs/ and lib/stubs/; bash globs, `**`
  matching one directory as it does without globstar);
- the unversioned `libX.so -> libX.so.N` links the archives carry and the
  wheels do not (CMake's find_library looks for `libX.so`);
- cuda_nvcc's postInstall: NVVM copied in as nvvm/ and nvcc.profile rewritten
  to absolute paths, exactly the substitutions cuda_nvcc.nix makes;
- cuda_cudart's postInstall links to the driver stub, which the wheel lacks:
  an empty library stands in for it (`_cudart_stubs`);
- the patches the Nix code adds to a component (`patches`: nix/cuda-packages.nix
  evaluated), applied with `patch -p1` as stdenv's patchPhase applies them to
  the unpacked archive, before anything is split into outputs (so only
  components with the one output `out` can be patched here).

Each output is a directory `<root>/<component>-<version>-<output>`, the shape
of a store path.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import StackError
from support.rehearsal import phases, wheels
from support.rehearsal.components import OUTPUT_ORDER, Component

WHEEL_ROOT = "nvidia/cu13/"
# buildRedist's outputToPatterns.
OUTPUT_PATTERNS = {
    "bin": ("bin",),
    "dev": ("**/*.pc", "**/*.cmake"),
    "include": ("include",),
    "lib": ("lib", "lib64"),
    "static": ("**/*.a",),
    "stubs": ("stubs", "lib/stubs"),
}
_SONAME = re.compile(r"^(lib[^/]*\.so)\.\d+$")


def relocate(component: Component, member: str) -> str | None:
    """Where a wheel member lands in the package (relative to the package root), or None if it is not installed."""
    if not member.startswith(WHEEL_ROOT):
        return None
    rel = member[len(WHEEL_ROOT):]
    if any(rel.startswith(prefix) for prefix in component.drop):
        return None
    for old, new in component.moves:
        if rel.startswith(old):
            return new + rel[len(old):]
    return rel


def _matches(rel: str, pattern: str) -> bool:
    """Whether rel is the path a bash glob names, or lies under it (moveToOutput moves whole directories)."""
    parts, globs = rel.split("/"), pattern.replace("**", "*").split("/")
    return len(parts) >= len(globs) and all(fnmatch.fnmatchcase(p, g) for p, g in zip(parts, globs))


def split_outputs(component: Component, files: Iterable[str]) -> dict[str, str]:
    """{relative path: output} after buildRedist's install phase."""
    owner = dict.fromkeys(files, "out")
    for output in (o for o in OUTPUT_ORDER if o in component.outputs and o != "out"):
        for pattern in OUTPUT_PATTERNS.get(output, ()):
            for rel in owner:
                if _matches(rel, pattern):
                    owner[rel] = output
    return owner


class CudaTree:
    """Components laid out under one root, each on first use."""

    def __init__(self, root: Path, components: dict[str, Component], *, compiler_bindir: str,
                 patches: dict[str, list[Path]] | None = None):
        self.root = root
        self.components = components
        self.compiler_bindir = compiler_bindir
        self.patches = dict(patches or {})
        self._done: dict[str, dict[str, Path]] = {}

    def output_dir(self, name: str, output: str) -> Path:
        component = self.component(name)
        return self.root / f"{name}-{component.version}-{output}"

    def component(self, name: str) -> Component:
        if name not in self.components:
            raise StackError(f"cudaPackages_13_0.{name} is used by the Nix code but is not in tests/support/rehearsal/cuda-13.0.2.json",
                             "add the component with its wheel (docs/nix-rehearsal.md)")
        return self.components[name]

    def outputs(self, name: str) -> dict[str, Path]:
        """{output: directory} of a component, laid out now if it is not yet."""
        if name not in self._done:
            self._done[name] = self._lay_out(self.component(name))
        return self._done[name]

    def _lay_out(self, component: Component) -> dict[str, Path]:
        dirs = {o: self.output_dir(component.name, o) for o in component.outputs}
        for d in dirs.values():
            if d.exists():  # a tree left by an interrupted run: lay it out again
                shutil.rmtree(d)
            d.mkdir(parents=True)
        fetched = [(relocate(component, m.name), m) for m in
                   wheels.members(component.wheel, lambda n: relocate(component, n) is not None)]
        owner = split_outputs(component, (rel for rel, _ in fetched if rel))
        for rel, member in fetched:
            if rel:
                wheels.place(member.path, dirs[owner[rel]] / rel, executable=member.executable)
        if self.patches.get(component.name):
            if list(dirs) != ["out"]:
                raise StackError(f"the Nix code patches {component.name}, whose outputs ({', '.join(dirs)}) the "
                                 "rehearsal splits before it could patch", "rehearse the patch on an unsplit copy")
            _apply_patches(dirs["out"], self.patches[component.name])
        for d in dirs.values():
            _soname_links(d)
        if component.name == "cuda_nvcc":
            self._nvcc_post_install(dirs["out"])
        if component.name == "cuda_cudart":
            _cudart_stubs(dirs["stubs"])
        return dirs

    def _nvcc_post_install(self, out: Path) -> None:
        """cuda_nvcc.nix's postInstall for CUDA >= 13.0: NVVM copied in, nvcc.profile made absolute."""
        nvvm = self.outputs("libnvvm")["out"]
        for path in sorted(nvvm.rglob("*")):
            if path.is_file() and not path.is_symlink():
                wheels.place(path, out / "nvvm" / path.relative_to(nvvm), executable=path.stat().st_mode & 0o100 != 0)
            elif path.is_symlink():
                link = out / "nvvm" / path.relative_to(nvvm)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(path.readlink())
        cccl = self.outputs("cuda_cccl")["out"]
        profile = out / "bin" / "nvcc.profile"
        text = profile.read_text()
        for old, new in (("$(_TARGET_SIZE_)", ""),
                         ("$(TOP)/$(_TARGET_DIR_)/include/cccl", f"{cccl}/include"),
                         ("$(TOP)/$(_TARGET_DIR_)/include", f"{out}/include"),
                         ("$(TOP)/nvvm/", f"{out}/nvvm/")):
            if old not in text:  # substituteInPlace --replace-fail
                raise StackError(f"{profile}: no {old!r} to replace: the wheel's nvcc.profile is not the one "
                                 "cuda_nvcc.nix patches", "compare the wheel with nixpkgs' cuda_nvcc archive")
            text = text.replace(old, new)
        text += (f'\n# Expose the split-out nvvm\nLIBRARIES =+ $(_SPACE_) "-L{out}/nvvm/lib"\n'
                 f'INCLUDES =+ $(_SPACE_) "-I{out}/nvvm/include"\n'
                 f"# Fix a compatible backend compiler\ncompiler-bindir = {self.compiler_bindir}\n")
        wheels.write_copy(profile, text)


def _apply_patches(root: Path, patches: list[Path]) -> None:
    """stdenv's patchPhase in root, each file a patch changes first made a copy of its own (the layout
    hard-links the cache)."""
    for patch in patches:
        for rel in re.findall(r"^\+\+\+ [^/\s]+/(\S+)", Path(patch).read_text(), re.MULTILINE):
            target = root / rel
            if target.is_file():
                wheels.write_copy(target, target.read_bytes())
    phases.apply_patches(root, patches)


def _soname_links(directory: Path) -> None:
    for lib in list(directory.glob("lib*/lib*.so.*")):
        m = _SONAME.match(lib.name)
        link = lib.with_name(m.group(1)) if m else None
        if link is not None and not link.exists() and not link.is_symlink():
            link.symlink_to(lib.name)


def _cudart_stubs(stubs: Path) -> None:
    """The driver stub's place in cuda_cudart's stubs output, and cuda_cudart.nix's postInstall links.

    NVIDIA's runtime wheel lacks the archive's lib/stubs/libcuda.so, so an empty shared library
    (soname libcuda.so.1, no symbols) stands in for it: CMake's FindCUDAToolkit then defines
    CUDA::cuda_driver, as it does in nixpkgs, but nothing that links -lcuda is rehearsed.
    """
    stub = stubs / "lib" / "stubs" / "libcuda.so"
    stub.parent.mkdir(parents=True, exist_ok=True)
    proc.run(["cc", "-shared", "-nostdlib", "-Wl,-soname,libcuda.so.1", "-o", str(stub), "-x", "c", "/dev/null"],
             timeout=60)
    (stub.parent / "libcuda.so.1").symlink_to("libcuda.so")
    for lib in sorted(stub.parent.iterdir()):
        (stubs / "lib" / lib.name).symlink_to(Path("stubs") / lib.name)
