"""pkgs/sgl-kernel's CMake defines, from the derivation to CMake.

The derivation (evaluated with the real nix; nixpkgs' functions recorded, as
nixpkgs cannot be evaluated here) renders the recipe's defines as
an initial-cache script (`--config-setting=cmake.args=-C<file>`, built by
lib/kernel-recipe.nix initialCache) plus `--config-setting=cmake.define.NAME=VALUE`
settings in `uvBuildFlags`, which pyproject.nix's build hook expands unquoted
into `uv build`. These tests run exactly that expansion with the real uv,
scikit-build-core and CMake on a tiny CMake project: a multi-architecture
value such as `10.0a;12.0a` reaches CMake as one list of two (where nixpkgs'
scikit-build-core setup hook, cmakeFlags joined into SKBUILD_CMAKE_ARGS with
`;`, would split it), a value with spaces arrives whole, a planned -D wins over
the script, and the script sets CMake's cache to exactly the Python side's
defines.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import REPO

DERIVATION = """
let
  recipe = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/recipe.json) // {{ arch = "{arch}"; }};
  recorded = name: {{ outPath = "/recorded/" + name; }};
  f = import ./pkgs/sgl-kernel/default.nix;
  lib = import {nixpkgs_lib}/lib;
  drv = f {{
    inherit lib;
    version = "0.3.21";
    sglKernelRecipe = recipe;
    autoAddDriverRunpath = "autoAddDriverRunpath";
    fetchFromGitHub = args: recorded args.name or "sglang";
    fetchzip = args: recorded args.name;
    runCommand = name: _: _: recorded name;
    pyprojectHook = "pyprojectHook";
    resolveBuildSystem = spec: builtins.attrNames spec;
    mkVirtualEnv = name: _: recorded name;
    python.sitePackages = "lib/python3.12/site-packages";
    python.interpreter = "/recorded/python3";
    torch = recorded "torch";
    cmake = "cmake";
    ninja = "ninja";
    numactl = "numactl";
    cudaPackages = {{
      cudaMajorMinorVersion = "13.0";
      backendStdenv.mkDerivation = g: let attrs = g attrs // {{ finalPackage = attrs; }}; in attrs;
      cuda_cudart = {{ stubs = recorded "cudart-stubs"; outputs = [ "out" "stubs" ]; outputSpecified = false; }};
      cuda_nvcc = "cuda_nvcc";
      cuda_cccl = "cuda_cccl";
      cuda_nvrtc = "cuda_nvrtc";
      libcublas = "libcublas";
      libcurand = "libcurand";
      libcusolver = "libcusolver";
      libcusparse = "libcusparse";
    }};
  }};
in {{
  inherit (drv) uvBuildFlags nativeBuildInputs doInstallCheck installCheckPhase;
  inherit (drv.passthru) cxxRuntimeCheckFiles;
  cache = (import ./lib/kernel-recipe.nix).initialCache {{ inherit recipe; }};
}}
"""

PROBE_CMAKE = """cmake_minimum_required(VERSION 3.15)
project(probe LANGUAGES C)
list(LENGTH SGL_KERNEL_CUDA_ARCHS count)
file(WRITE "${CMAKE_BINARY_DIR}/seen.json"
  "{\\"archs\\": \\"${SGL_KERNEL_CUDA_ARCHS}\\", \\"count\\": ${count}, \\"fp4\\": \\"${SGL_KERNEL_ENABLE_FP4}\\",
   \\"archive\\": \\"${CMAKE_C_ARCHIVE_CREATE}\\", \\"threads\\": \\"${SGL_KERNEL_COMPILE_THREADS}\\"}")
add_library(probe MODULE probe.c)
install(TARGETS probe LIBRARY DESTINATION sgl_kernel)
install(FILES "${CMAKE_BINARY_DIR}/seen.json" DESTINATION sgl_kernel)
"""


def derivation_flags(nix, arch: str) -> dict:
    from support import nix_inputs

    return nix.eval(DERIVATION.format(arch=arch, nixpkgs_lib=nix_inputs.source("nixpkgs-lib")))


@pytest.mark.nix
def test_the_derivation_passes_every_define_as_a_config_setting(nix):
    got = derivation_flags(nix, "10.0a;12.0a")
    flags = got["uvBuildFlags"]
    assert all(f.startswith(("--config-setting=cmake.define.", "--config-setting=cmake.args=-C")) for f in flags)
    (script,) = [f for f in flags if f.startswith("--config-setting=cmake.args=-C")]
    assert script.endswith("-sgl-kernel-recipe.cmake")
    # The recipe's defines are in the script, the multi-architecture list as one quoted value.
    assert 'set(SGL_KERNEL_CUDA_ARCHS "10.0a;12.0a" CACHE STRING "")' in got["cache"].splitlines()
    assert "--config-setting=cmake.define.CUDA_VERSION=13.0" in flags
    # The kernel's build system: scikit-build-core, wheel (which sgl-kernel's pyproject.toml does not name), torch.
    assert {"scikit-build-core", "wheel", "torch"} <= set(got["nativeBuildInputs"])
    # No value has a space: the hook's unquoted $uvBuildFlags splits on spaces only.
    assert not [f for f in flags if " " in f]


@pytest.mark.nix
def test_the_derivation_checks_its_wheels_cxx_runtime_with_the_projects_own_check(nix, tmp_path):
    """The install check runs formats/cxxruntime.py on $dist's wheel, from just the files the derivation copies:
    those files alone run the check (a library linked with -static-libstdc++ fails it, a plain one passes)."""
    got = derivation_flags(nix, "12.0a")
    assert got["doInstallCheck"] is True
    assert '-m blackwell_stack.formats.cxxruntime "$dist"/*.whl' in got["installCheckPhase"]
    assert "/recorded/python3 " in got["installCheckPhase"]
    only = tmp_path / "src"
    for rel in got["cxxRuntimeCheckFiles"]:
        (only / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "src" / rel, only / rel)
    gxx = shutil.which("g++") or pytest.skip("g++ is needed")
    (tmp_path / "x.cc").write_text('#include <stdexcept>\nextern "C" void f() { throw std::runtime_error("x"); }\n')
    for name, flags, code in (("static", ["-static-libstdc++"], 1), ("shared", [], 0)):
        lib = tmp_path / f"{name}.so"
        subprocess.run([gxx, "-shared", "-fPIC", *flags, str(tmp_path / "x.cc"), "-o", str(lib)], check=True, timeout=120)
        run = subprocess.run([sys.executable, "-I", "-m", "blackwell_stack.formats.cxxruntime", str(lib)], cwd=only,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == code, run.stdout + run.stderr


@pytest.mark.nix
@pytest.mark.slow
def test_a_multi_architecture_value_reaches_cmake_as_one_list(nix, tmp_path):
    uv = shutil.which("uv")
    pytest.importorskip("scikit_build_core", reason="pip install scikit-build-core (a test dependency)")
    if uv is None or not (shutil.which("cmake") and shutil.which("ninja")):
        pytest.skip("uv, cmake and ninja are needed")
    got = derivation_flags(nix, "10.0a;12.0a")
    cache = tmp_path / "sgl-kernel-recipe.cmake"
    cache.write_text(got["cache"])
    # The derivation's script setting, pointed at the same text here; then a planned define, as preBuild adds it.
    flags = [f"--config-setting=cmake.args=-C{cache}" if f.startswith("--config-setting=cmake.args=-C") else f
             for f in got["uvBuildFlags"] if "cmake.args" in f]
    flags.append("--config-setting=cmake.define.SGL_KERNEL_COMPILE_THREADS=4")
    project = tmp_path / "sgl-kernel"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(PROBE_CMAKE)
    (project / "probe.c").write_text("int probe(void) { return 120; }\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "sgl-kernel"\nversion = "0.3.21"\n[tool.scikit-build]\nwheel.packages = []\n')
    # pyproject.nix's build hook: `uv build ... --no-build-isolation --out-dir dist/ --wheel $uvBuildFlags`
    # (build/hooks/pyproject-build-hook.sh), with the flags as the environment variable Nix exports.
    script = f'{uv} build -q --offline --no-build-isolation --python {sys.executable} --out-dir dist/ --wheel $uvBuildFlags'
    result = subprocess.run(["bash", "-c", script], cwd=project, capture_output=True, text=True, timeout=600,
                            env={"uvBuildFlags": " ".join(flags), "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
                                 "HOME": str(tmp_path), "UV_NO_CACHE": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (project / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        seen = json.loads(zf.read("sgl_kernel/seen.json"))
    assert seen == {"archs": "10.0a;12.0a", "count": 2, "fp4": "ON",
                    "archive": "<CMAKE_AR> qcD <TARGET> <LINK_FLAGS> <OBJECTS>", "threads": "4"}


@pytest.mark.nix
def test_the_initial_cache_sets_exactly_the_python_defines(nix, tmp_path):
    """CMake itself reads the script: its cache holds each recipe define with the value the Python side computes."""
    from blackwell_stack.kernel.inputs import recipe

    if shutil.which("cmake") is None:
        pytest.skip("cmake is needed")
    rec = recipe.load()
    cache = tmp_path / "recipe.cmake"
    cache.write_text(nix.eval("let kr = import ./lib/kernel-recipe.nix; r = builtins.fromJSON (builtins.readFile "
                              "./pkgs/sgl-kernel/recipe.json); in kr.initialCache { recipe = r; archs = \"10.0a;12.0a\"; }"))
    project = tmp_path / "probe"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.15)\nproject(probe NONE)\n")
    subprocess.run(["cmake", "-C", str(cache), "-S", str(project), "-B", str(tmp_path / "build")],
                   check=True, capture_output=True, timeout=120)
    seen = {}
    for line in (tmp_path / "build" / "CMakeCache.txt").read_text().splitlines():
        if ":" in line and "=" in line and not line.startswith(("//", "#")):
            key, value = line.split("=", 1)
            seen[key.split(":", 1)[0]] = value
    expected = recipe.defines(rec, "10.0a;12.0a")
    assert {k: seen.get(k) for k in expected} == expected
