"""What nixpkgs' stdenv makes of a derivation's inputs, modelled on directories laid out like store paths.

- `symlink_join`: pkgs.symlinkJoin (lndir of each path into $out, the first
  file at a path winning, then postBuild run by bash with $out set).
- `host_closure`: the build inputs setup.sh's findInputs collects: each input
  (a package stands for its dev output, as make-derivation's
  chooseDevOutputs picks it), then what that output propagates, depth first.
  A CUDA package's dev output propagates its bin/include/lib outputs (and
  buildRedist's extra propagatedBuildOutputs) and the package's
  propagatedBuildInputs; its out output propagates the same outputs
  (buildRedist's fixupCudaPropagatedBuildOutputsToOut).
- `build_environment`: what the setup hooks of cmake, the compiler wrapper
  and the linker wrapper make of those paths: NIXPKGS_CMAKE_PREFIX_PATH
  (passed to a stock CMake as CMAKE_PREFIX_PATH), `-isystem <p>/include` in
  NIX_CFLAGS_COMPILE and `-L<p>/lib` in NIX_LDFLAGS.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import proc
from support.rehearsal.components import Component
from support.rehearsal.layout import CudaTree


def symlink_join(out: Path, paths: Iterable[Path], post_build: str = "") -> Path:
    """pkgs.symlinkJoin { paths; postBuild; } built at out."""
    out.mkdir(parents=True, exist_ok=False)
    for path in paths:
        _lndir(Path(path), out)
    if post_build.strip():
        proc.run(["bash", "-eu", "-o", "pipefail", "-c", post_build], cwd=out,
                 env={"out": str(out), "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    return out


def _lndir(source: Path, dest: Path) -> None:
    """X11's lndir -silent: real directories, a symlink per file, an existing name left as it is."""
    for entry in sorted(source.iterdir()):
        target = dest / entry.name
        if entry.is_dir() and not entry.is_symlink():
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                continue
            target.mkdir(exist_ok=True)
            _lndir(entry, target)
        elif not target.exists() and not target.is_symlink():
            target.symlink_to(entry)


@dataclass(frozen=True)
class Input:
    """A build input as evaluated: a CUDA component's output, or any other directory (a stand-in)."""

    path: Path
    component: str | None = None
    output: str | None = None


def dev_output(component: Component) -> str:
    return "dev" if "dev" in component.outputs else "out"


def propagated_outputs(component: Component) -> list[str]:
    """The outputs a CUDA package's dev (and out) output propagates: bin/include/lib present, plus its extras."""
    base = [o for o in ("bin", "include", "lib") if o in component.outputs]
    return [o for o in base + list(component.propagated_build_outputs) if o != dev_output(component)]


def host_closure(inputs: Iterable[Input], tree: CudaTree) -> list[Input]:
    """setup.sh's findInputs over the build inputs, depth first, each path once (CUDA ones laid out)."""
    seen: set[Path] = set()
    order: list[Input] = []

    def visit(item: Input) -> None:
        if item.path in seen:
            return
        seen.add(item.path)
        order.append(item)
        if item.component is None or item.output is None:
            return
        tree.outputs(item.component)  # laid out now, if not yet
        component = tree.component(item.component)
        dev = dev_output(component)
        if item.output == dev:
            for dep, output in component.propagated_build_inputs:
                dep_component = tree.component(dep)
                chosen = output if output in dep_component.outputs else dev_output(dep_component) if output is None else "out"
                visit(Input(tree.output_dir(dep, chosen), dep, chosen))
        if item.output in (dev, "out"):
            for output in propagated_outputs(component):
                visit(Input(tree.output_dir(item.component, output), item.component, output))

    for item in inputs:
        visit(item)
    return order


def build_environment(paths: Iterable[Path]) -> dict[str, str]:
    """The variables the cmake, cc-wrapper and bintools-wrapper setup hooks derive from host inputs."""
    prefixes, cflags, ldflags = [], [], []
    for path in paths:
        prefixes.append(str(path))
        if (path / "include").is_dir():
            cflags.append(f"-isystem {path / 'include'}")
        lib64 = path / "lib64"
        if lib64.is_dir() and not lib64.is_symlink():
            ldflags.append(f"-L{lib64}")
        if (path / "lib").is_dir() and any((path / "lib").glob("lib*")):
            ldflags.append(f"-L{path / 'lib'}")
    return {"CMAKE_PREFIX_PATH": ":".join(prefixes), "NIX_CFLAGS_COMPILE": " ".join(cflags),
            "NIX_LDFLAGS": " ".join(ldflags)}


def setup_cuda_hook(hosts: Iterable[Input], nvcc_bin: Path, host_cxx: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """What nixpkgs' setupCudaHook (propagated by cuda_nvcc) leaves for a build: (cmakeFlags, cmakeFlagsArray, env).

    Every output of a CUDA package carries the marker it looks for (markForCudatoolkitRootHook), so
    CUDAToolkit_ROOT is every CUDA host input and nvcc's prefix, CUDAToolkit_INCLUDE_DIR their include
    directories (pkgs/development/cuda-modules/packages/setupCudaHook/setup-cuda-hook.sh).
    """
    roots = [h.path for h in hosts if h.component is not None]
    includes = [p / "include" for p in roots if (p / "include").is_dir()]
    roots.append(nvcc_bin.parent)
    flags = [f"-DCUDA_HOST_COMPILER={host_cxx}", f"-DCMAKE_CUDA_HOST_COMPILER={host_cxx}"]
    array = [f"-DCUDAToolkit_INCLUDE_DIR={';'.join(map(str, includes))}", f"-DCUDAToolkit_ROOT={';'.join(map(str, roots))}"]
    return flags, array, {"CUDAHOSTCXX": str(host_cxx), "NVCC_PREPEND_FLAGS": "-Xfatbin=-compress-all"}
