"""The recipe's reproducibility settings, on small real builds: the same project built twice, in other
directories and at other times, gives the same bytes with them and different bytes without them.

The settings under test are the ones `kernel build` and the Nix derivation use: recipe.json's
CMake defines (deterministic ar and ranlib) and environment (nvcc's --objdir-as-tempdir and
-frandom-seed, SOURCE_DATE_EPOCH), with the prefix maps `kernel build` adds (prepare._with_prefix_maps).
Real CMake, Ninja, g++ and ar; nvcc 13 for the CUDA case.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from blackwell_stack.kernel.build import prepare
from blackwell_stack.kernel.inputs import recipe

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

CUDA_CANDIDATES = ("/usr/local/cuda-13.0/bin/nvcc", "/usr/local/cuda/bin/nvcc")

CXX_PROJECT = """cmake_minimum_required(VERSION 3.20)
project(repro LANGUAGES {languages})
add_library(objs OBJECT {sources})
set_target_properties(objs PROPERTIES POSITION_INDEPENDENT_CODE ON {cuda_arch})
add_library(objs_static STATIC)
target_link_libraries(objs_static PUBLIC objs)
add_library(ops MODULE ops.cc)
target_link_libraries(ops PRIVATE objs_static {cuda_link})
install(TARGETS ops LIBRARY DESTINATION pkg)
install(TARGETS objs_static ARCHIVE DESTINATION lib)
"""

WHERE_CC = '#include <cstdio>\nint where() { return std::puts(__FILE__); }\n'
OPS_CC = 'int where();\nextern "C" int ops() { return where(); }\n'
# A file whose only external definitions are explicit template instantiations, as in
# dsv3_router_gemm_*.cu: nvcc then ends the names of its internal-linkage entities (here cuda::std's
# customization point objects) in a number that changes with every compile, and those names land in
# the library (what made common_ops differ between two builds).
LAUNCH_CU = """#include <cuda_runtime.h>
#include <cuda/std/iterator>
template <typename T, int N>
__global__ void scale(T* x, T a) { if (threadIdx.x < N) x[threadIdx.x] *= a; }
template <typename T, int N>
void invoke(T* x, T a, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = 1; config.blockDim = 32; config.stream = stream;
  cudaLaunchKernelEx(&config, scale<T, N>, x, a);
}
template void invoke<float, 4>(float*, float, cudaStream_t);
"""
OPS_CUDA_CC = """struct CUstream_st;
template <typename T, int N> void invoke(T* x, T a, CUstream_st* stream);
extern template void invoke<float, 4>(float*, float, CUstream_st*);
int where();
extern "C" int ops(float* x) { invoke<float, 4>(x, 1.f, nullptr); return where(); }
"""


def tools() -> tuple[str, str]:
    cmake, ninja = shutil.which("cmake"), shutil.which("ninja")
    if not (cmake and ninja and shutil.which("g++") and shutil.which("ar")):
        pytest.skip("cmake, ninja, g++ and ar are needed")
    return cmake, ninja


def nvcc() -> str:
    found = shutil.which("nvcc") or next((p for p in CUDA_CANDIDATES if Path(p).is_file()), None)
    if found is None:
        pytest.skip("nvcc (CUDA 13) is not installed here")
    return found


def recipe_settings(source: Path, build_dir: Path, *, prefix_maps: bool = True) -> tuple[list[str], dict[str, str]]:
    """The recipe's archive defines and environment, with the prefix maps kernel build adds."""
    rec = recipe.load()
    defines = {k: v for k, v in recipe.defines(rec).items() if "_ARCHIVE_" in k}
    maps = [f"-ffile-prefix-map={source}=src", f"-ffile-prefix-map={build_dir}=build"] if prefix_maps else []
    env = prepare._with_prefix_maps({k: v for k, v in recipe.environment(rec).items() if k in ("CUDAFLAGS", "SOURCE_DATE_EPOCH")}, maps)
    return [f"-D{k}={v}" for k, v in sorted(defines.items())], env


def build_once(tmp: Path, source: Path, build_dir: Path, defines: list[str], env: dict[str, str], extra: list[str]) -> dict[str, bytes]:
    cmake, ninja = tools()
    full_env = {k: v for k, v in os.environ.items() if k not in ("CFLAGS", "CXXFLAGS", "CUDAFLAGS", "SOURCE_DATE_EPOCH")}
    full_env.update(env)
    run = lambda *argv: subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=900)  # noqa: E731
    done = run(cmake, "-S", str(source), "-B", str(build_dir), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
               "-DCMAKE_BUILD_TYPE=Release", *defines, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    for step in (("--build", str(build_dir)), ("--install", str(build_dir), "--prefix", str(build_dir / "inst"), "--strip")):
        done = run(cmake, *step)
        assert done.returncode == 0, done.stdout + done.stderr
    inst = build_dir / "inst"
    return {str(p.relative_to(inst)): p.read_bytes() for p in sorted(inst.rglob("*")) if p.is_file()}


def project(root: Path, files: dict[str, str], languages: str, sources: str, cuda: bool = False) -> Path:
    root.mkdir(parents=True)
    (root / "CMakeLists.txt").write_text(CXX_PROJECT.format(
        languages=languages, sources=sources, cuda_arch="CUDA_ARCHITECTURES 120a-real" if cuda else "",
        cuda_link="CUDA::cudart" if cuda else ""))
    if cuda:
        text = (root / "CMakeLists.txt").read_text()
        (root / "CMakeLists.txt").write_text(text.replace("add_library(objs OBJECT", "find_package(CUDAToolkit REQUIRED)\nadd_library(objs OBJECT", 1))
    for name, text in {"ops.cc": OPS_CUDA_CC if cuda else OPS_CC, **files}.items():
        (root / name).write_text(text)
    return root


def test_cxx_library_built_twice_elsewhere_later_is_the_same(tmp_path):
    tools()
    files = {"where.cc": WHERE_CC}
    a = project(tmp_path / "a" / "src", files, "CXX", "where.cc")
    b = project(tmp_path / "second" / "checkout" / "src", files, "CXX", "where.cc")
    builds = {}
    for name, source, build_dir in (("a", a, tmp_path / "a" / "build"), ("b", b, tmp_path / "b-longer" / "build")):
        defines, env = recipe_settings(source, build_dir)
        builds[name] = build_once(tmp_path, source, build_dir, defines, env, [])
        time.sleep(1.1)  # archive members would carry the time they were added
    assert builds["a"].keys() == {"lib/libobjs_static.a", "pkg/libops.so"}
    assert builds["a"] == builds["b"]

    # Without the recipe's deterministic ar: the archive records each member's time, uid and mode.
    defines, env = recipe_settings(a, tmp_path / "u1")
    undeterministic = [d.replace("qcD", "qcU").replace("-D <TARGET>", "<TARGET>") for d in defines]
    first = build_once(tmp_path, a, tmp_path / "u1", undeterministic, env, [])
    time.sleep(1.1)
    defines, env = recipe_settings(a, tmp_path / "u2")
    second = build_once(tmp_path, a, tmp_path / "u2", [d.replace("qcD", "qcU").replace("-D <TARGET>", "<TARGET>") for d in defines], env, [])
    assert first["lib/libobjs_static.a"] != second["lib/libobjs_static.a"]

    # Without the prefix maps: __FILE__ holds the checkout's path.
    defines, env = recipe_settings(b, tmp_path / "p", prefix_maps=False)
    unmapped = build_once(tmp_path, b, tmp_path / "p", defines, env, [])
    assert unmapped["pkg/libops.so"] != builds["a"]["pkg/libops.so"]
    assert str(b).encode() in unmapped["pkg/libops.so"] and str(a).encode() not in builds["a"]["pkg/libops.so"]


@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_library_built_twice_is_the_same_with_the_recipes_nvcc_flags(tmp_path):
    compiler = nvcc()
    tools()
    # nvcc names this file's internal entities after its absolute path, so both builds read one checkout.
    source = project(tmp_path / "src", {"launch.cu": LAUNCH_CU, "where.cc": WHERE_CC}, "CXX CUDA", "launch.cu where.cc", cuda=True)
    extra = [f"-DCMAKE_CUDA_COMPILER={compiler}"]
    fixed = []
    for build_dir in (tmp_path / "build", tmp_path / "b" / "uild-two"):
        defines, env = recipe_settings(source, build_dir)
        assert "--objdir-as-tempdir" in env["CUDAFLAGS"] and "-frandom-seed=" in env["CUDAFLAGS"]
        fixed.append(build_once(tmp_path, source, build_dir, defines, env, extra))
    assert fixed[0] == fixed[1]

    # Without them: the archive's object names nvcc's /tmp/tmpxft_<pid>_... file, and the library's
    # internal names end in a number that changes with every compile.
    plain = []
    for build_dir in (tmp_path / "plain1", tmp_path / "plain2"):
        defines, env = recipe_settings(source, build_dir)
        env["CUDAFLAGS"] = " ".join(f for f in env["CUDAFLAGS"].split() if f.startswith("-Xcompiler="))
        plain.append(build_once(tmp_path, source, build_dir, defines, env, extra))
    assert plain[0]["lib/libobjs_static.a"] != plain[1]["lib/libobjs_static.a"]
    assert b"tmpxft_" in plain[0]["lib/libobjs_static.a"] and b"tmpxft_" not in fixed[0]["lib/libobjs_static.a"]
    assert plain[0]["pkg/libops.so"] != plain[1]["pkg/libops.so"]
