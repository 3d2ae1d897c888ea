"""The sgl-kernel patch series (patches/sgl-kernel): well formed and numbered, and
each fix shown with real tools on real files:

- 0004 applies to the real sgl_kernel/flash_attn.py of the PyPI wheel
  sgl-kernel==0.3.21, and the patched module imports without flash_ops where
  the unpatched one raises;
- 0001's guarded policies configure with this machine's CMake (3.25, which
  knows neither policy), the unguarded upstream lines do not;
- 0002's CMake code finds CUDA 13's CCCL directory, and a C++ file including
  <cuda/atomic> compiles with it and not without it (g++, CUDA 13 headers);
- 0005's CMake block turns SGL_KERNEL_CUDA_ARCHS into gencodes and library
  choices, and its load_utils.py check (applied to the wheel's file) refuses a
  GPU the build has no kernels for, naming the built architectures;
- 0006 and 0007, in a project that adds a subdirectory the way sgl-kernel adds
  mscclpp (its own CMAKE_CUDA_ARCHITECTURES 80 90, install rules for a shared
  library, an archive and headers): the subdirectory's CUDA code is compiled
  for sm_120a only, and nothing of it is built beyond what is linked or
  installed (real CMake, Ninja and nvcc 13);
- 0008's pools: refused with a clear message by a CMake older than 4.2, and
  the listed sources in the pool with a newer one; 0009 installs the record.

The CMake and Python code under test is read from the patches themselves.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import REPO

from blackwell_stack.kernel.inputs import patch_series

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

PATCH_DIR = REPO / "patches" / "sgl-kernel"
PATCH_NAME = re.compile(r"^(\d{4})-[a-z0-9][a-z0-9._-]*\.patch$", re.IGNORECASE)
CUDA_HOME = Path("/usr/local/cuda-13.0")

SGL_KERNEL_WHEEL = ("sgl-kernel", "0.3.21", "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl")


def file_of(patch: patch_series.Patch, path: str) -> patch_series.FilePatch:
    return next(f for f in patch.files if f.path == path)


def section_text(patch: patch_series.Patch, path: str) -> str:
    """The part of the patch that changes `path` (its `diff --git` section), to apply on its own."""
    text = patch.path.read_text()
    return next(chunk for chunk in re.split(r"(?m)^(?=diff --git )", text) if chunk.startswith(f"diff --git a/{path} "))


def series() -> list[Path]:
    return sorted(PATCH_DIR.glob("*.patch"))


def patch_named(number: str) -> patch_series.Patch:
    (path,) = PATCH_DIR.glob(f"{number}-*.patch")
    return patch_series.parse_patch(path)


def require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (apt-get install {tool}); .ci/run installs it")
    return found


# ---------------------------------------------------------------- well formed


def test_series_is_numbered_without_gaps():
    names = [p.name for p in series()]
    assert names, "patches/sgl-kernel holds no patches"
    numbers = []
    for name in names:
        m = PATCH_NAME.match(name)
        assert m, f"{name}: not NNNN-short-name.patch"
        numbers.append(int(m.group(1)))
    assert numbers == list(range(1, len(names) + 1)), names
    assert len(names) == 9


@pytest.mark.parametrize("path", series(), ids=lambda p: p.name[:4])
def test_each_patch_is_a_headed_git_diff_relative_to_sgl_kernel(path):
    patch = patch_series.parse_patch(path)  # the CLI's parser: it checks each hunk against its header
    header = patch.description
    assert header, f"{path.name}: no comment header before the first 'diff --git'"
    assert "Without it" in header, f"{path.name}: the header must say what breaks without it"
    assert "Upstream" in header, f"{path.name}: the header must name the upstream issue/PR (or say none)"
    for diff in patch.files:
        assert diff.old_path == diff.new_path, f"{path.name}: a patch changes files, it does not add or move them"
        assert not diff.path.startswith(("sgl-kernel/", "/")), f"{path.name}: paths are relative to sgl-kernel/"
        assert diff.path in {
            "CMakeLists.txt",
            "python/sgl_kernel/flash_attn.py",
            "python/sgl_kernel/load_utils.py",
        }, f"{path.name}: unexpected file {diff.path}"


def test_one_concern_per_patch_touches_the_expected_files():
    touched = {p.name[:4]: sorted(f.path for f in patch_series.parse_patch(p).files) for p in series()}
    assert touched == {
        "0001": ["CMakeLists.txt"],
        "0002": ["CMakeLists.txt"],
        "0003": ["CMakeLists.txt"],
        "0004": ["python/sgl_kernel/flash_attn.py"],
        "0005": ["CMakeLists.txt", "python/sgl_kernel/load_utils.py"],
        "0006": ["CMakeLists.txt"],
        "0007": ["CMakeLists.txt"],
        "0008": ["CMakeLists.txt"],
        "0009": ["CMakeLists.txt"],
    }


def test_readme_indexes_every_patch():
    readme = (PATCH_DIR / "README.md").read_text()
    for path in series():
        assert path.name in readme, f"README.md does not list {path.name}"


# ---------------------------------------------------------------- fix 4 on the real wheel


@pytest.fixture(scope="module")
def wheel_python_package(pypi_file, tmp_path_factory) -> Path:
    """The Python files of the PyPI wheel sgl-kernel==0.3.21 (no compiled extensions),
    as python/sgl_kernel/ under a temporary directory, like the source tree."""
    wheel = pypi_file(*SGL_KERNEL_WHEEL)
    root = tmp_path_factory.mktemp("sgl-kernel-wheel")
    package = root / "python" / "sgl_kernel"
    package.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("sgl_kernel/") and name.endswith(".py") and name.count("/") == 1:
                (package / name.split("/", 1)[1]).write_bytes(zf.read(name))
    assert (package / "flash_attn.py").exists(), "the wheel has no sgl_kernel/flash_attn.py"
    return root


def apply(patch_text: str, root: Path, *, dry_run: bool = False) -> subprocess.CompletedProcess:
    argv = [require("patch"), "-p1", "--batch", "--forward"]
    if dry_run:
        argv.append("--dry-run")
    return subprocess.run(argv, input=patch_text, cwd=root, capture_output=True, text=True, timeout=60)


def import_flash_attn(root: Path):
    """Import python/sgl_kernel/flash_attn.py as sgl_kernel.flash_attn, with a bare
    sgl_kernel package over the wheel's Python files: its __init__ is not run
    (it loads common_ops, which needs a GPU) and there is no flash_ops."""
    pytest.importorskip("torch", reason="flash_attn.py imports torch: pip install torch (CPU is enough)")
    package_dir = root / "python" / "sgl_kernel"
    for name in [m for m in sys.modules if m == "sgl_kernel" or m.startswith("sgl_kernel.")]:
        del sys.modules[name]
    spec = importlib.machinery.ModuleSpec("sgl_kernel", None, is_package=True)
    package = importlib.util.module_from_spec(spec)
    package.__path__ = [str(package_dir)]
    sys.modules["sgl_kernel"] = package
    try:
        return importlib.import_module("sgl_kernel.flash_attn")
    finally:
        for name in [m for m in sys.modules if m == "sgl_kernel" or m.startswith("sgl_kernel.")]:
            del sys.modules[name]


def test_fix4_unpatched_wheel_module_raises_without_flash_ops(wheel_python_package, tmp_path):
    copy = tmp_path / "unpatched"
    shutil.copytree(wheel_python_package, copy)
    with pytest.raises(ImportError, match="Can not import FA3"):
        import_flash_attn(copy)


def test_fix4_applies_to_the_wheel_and_imports_without_flash_ops(wheel_python_package, tmp_path):
    copy = tmp_path / "patched"
    shutil.copytree(wheel_python_package, copy)
    text = patch_named("0004").path.read_text()
    dry = apply(text, copy, dry_run=True)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    done = apply(text, copy)
    assert done.returncode == 0 and "offset" not in done.stdout and "fuzz" not in done.stdout, done.stdout
    module = import_flash_attn(copy)
    assert module.flash_ops is None
    assert callable(module.flash_attn_with_kvcache) and callable(module.flash_attn_varlen_func)


# ---------------------------------------------------------------- fix 1 with real CMake


def cmake_configure(tmp_path: Path, body: str, *defines: str) -> subprocess.CompletedProcess:
    cmake = require("cmake")
    (tmp_path / "CMakeLists.txt").write_text(body)
    return subprocess.run(
        [cmake, "-S", str(tmp_path), "-B", str(tmp_path / "build"), *defines],
        capture_output=True,
        text=True,
        timeout=300,
    )


def cmake_version() -> tuple[int, int]:
    out = subprocess.run([require("cmake"), "--version"], capture_output=True, text=True).stdout
    major, minor = re.search(r"(\d+)\.(\d+)", out).groups()
    return int(major), int(minor)


POLICY_PROJECT = "cmake_minimum_required(VERSION 3.20)\nproject(policy_guard NONE)\ninclude(FetchContent)\n{lines}\n"


def test_fix1_guarded_policies_configure_where_unguarded_fail(tmp_path):
    if cmake_version() >= (3, 30):
        pytest.skip("this CMake knows CMP0169; the failure needs CMake < 3.30 (Debian 12 has 3.25)")
    hunk = file_of(patch_named("0001"), "CMakeLists.txt").hunks[0]
    unguarded = "\n".join(line for line in hunk.old if "cmake_policy" in line)
    guarded_start = next(i for i, line in enumerate(hunk.new) if "POLICY CMP0169" in line)
    guarded = "\n".join(hunk.new[guarded_start : guarded_start + 6])
    assert "cmake_policy(SET CMP0177 NEW)" in guarded and guarded.count("endif()") == 2

    (tmp_path / "old").mkdir()
    old = cmake_configure(tmp_path / "old", POLICY_PROJECT.format(lines=unguarded))
    assert old.returncode != 0
    assert 'Policy "CMP0169" is not known' in " ".join(old.stderr.split())

    (tmp_path / "new").mkdir()
    new = cmake_configure(tmp_path / "new", POLICY_PROJECT.format(lines=guarded))
    assert new.returncode == 0, new.stderr


# ---------------------------------------------------------------- fix 2 with CUDA 13 headers


ATOMIC_TU = "#include <cuda/atomic>\nint main() { cuda::atomic<int> a{0}; a.fetch_add(1); return a.load() - 1; }\n"


def require_cuda13_headers() -> Path:
    include = CUDA_HOME / "include"
    if not (include / "cccl" / "cuda" / "atomic").exists():
        pytest.skip(f"no CUDA 13 toolkit headers at {CUDA_HOME} (include/cccl/cuda/atomic): install cuda-toolkit-13-0")
    return include


def test_fix2_cuda_atomic_needs_the_cccl_include_dir(tmp_path):
    include = require_cuda13_headers()
    gxx = require("g++")
    source = tmp_path / "atomic.cc"
    source.write_text(ATOMIC_TU)
    base = [gxx, "-std=c++17", "-fsyntax-only", f"-I{include}", str(source)]
    without = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert without.returncode != 0 and "cuda/atomic: No such file or directory" in without.stderr
    with_cccl = subprocess.run(base + [f"-I{include / 'cccl'}"], capture_output=True, text=True, timeout=300)
    assert with_cccl.returncode == 0, with_cccl.stderr


def test_fix2_patch_cmake_code_finds_cccl_for_host_code(tmp_path):
    """The find_path/include_directories lines of 0002, in a CMake project that
    compiles <cuda/atomic> as host C++ the way mscclpp's .cc files are."""
    include = require_cuda13_headers()
    added = list(file_of(patch_named("0002"), "CMakeLists.txt").hunks[0].new)
    start = next(i for i, line in enumerate(added) if line.startswith("find_path(SGL_KERNEL_CCCL_INCLUDE_DIR"))
    end = next(i for i, line in enumerate(added) if line == "endif()" and i > start)
    snippet = "\n".join(added[start : end + 1])
    (tmp_path / "atomic.cc").write_text(ATOMIC_TU)

    def project(with_fix: bool) -> str:
        return (
            "cmake_minimum_required(VERSION 3.20)\nproject(cccl_probe CXX)\n"
            "find_package(CUDAToolkit REQUIRED)\n"
            + (snippet + "\n" if with_fix else "")
            + "message(STATUS \"CCCL dir: ${SGL_KERNEL_CCCL_INCLUDE_DIR}\")\n"
            "add_executable(probe atomic.cc)\ntarget_include_directories(probe SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})\n"
        )

    results = {}
    for with_fix in (False, True):
        (tmp_path / "CMakeLists.txt").write_text(project(with_fix))
        build = tmp_path / f"build-{with_fix}"
        configure = subprocess.run(
            [require("cmake"), "-S", str(tmp_path), "-B", str(build), f"-DCUDAToolkit_ROOT={CUDA_HOME}"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert configure.returncode == 0, configure.stdout + configure.stderr
        if with_fix:
            assert f"CCCL dir: {include / 'cccl'}" in configure.stdout
        results[with_fix] = subprocess.run(
            [require("cmake"), "--build", str(build)], capture_output=True, text=True, timeout=600
        )
    assert results[False].returncode != 0 and "cuda/atomic" in results[False].stdout + results[False].stderr
    assert results[True].returncode == 0, results[True].stdout + results[True].stderr


# ---------------------------------------------------------------- fix 3


def test_fix3_drops_the_shadowing_set_and_defaults_the_option():
    diff = file_of(patch_named("0003"), "CMakeLists.txt")
    removed = [line for hunk in diff.hunks for line in hunk.old if line not in hunk.new]
    assert [line.strip() for line in removed] == [
        'option(SGL_KERNEL_ENABLE_FA3              "Enable FA3"              OFF)',
        "set(SGL_KERNEL_ENABLE_FA3 ON)",
    ]


def test_fix3_option_keeps_an_explicit_off(tmp_path):
    """The option lines of 0003 with CUDA 13: ON by default, OFF when asked."""
    hunk = file_of(patch_named("0003"), "CMakeLists.txt").hunks[0]
    start = next(i for i, line in enumerate(hunk.new) if line.startswith('if ("${CUDA_VERSION}"'))
    end = next(i for i, line in enumerate(hunk.new) if line.startswith("option(SGL_KERNEL_ENABLE_FA3"))
    body = (
        "cmake_minimum_required(VERSION 3.20)\nproject(fa3 NONE)\nset(CUDA_VERSION 13.0)\n"
        + "\n".join(hunk.new[start : end + 1])
        + '\nmessage(STATUS "FA3=${SGL_KERNEL_ENABLE_FA3}")\n'
    )
    (tmp_path / "default").mkdir()
    (tmp_path / "off").mkdir()
    default = cmake_configure(tmp_path / "default", body)
    off = cmake_configure(tmp_path / "off", body, "-DSGL_KERNEL_ENABLE_FA3=OFF")
    assert "FA3=ON" in default.stdout, default.stdout + default.stderr
    assert "FA3=OFF" in off.stdout, off.stdout + off.stderr


# ---------------------------------------------------------------- fix 5


def arch_block() -> str:
    lines = file_of(patch_named("0005"), "CMakeLists.txt").hunks[0].new
    start = next(i for i, line in enumerate(lines) if line.startswith("# Target architectures chosen"))
    end = max(i for i, line in enumerate(lines) if line == "endif()")
    return "\n".join(lines[start : end + 1])


ARCH_PROJECT = """cmake_minimum_required(VERSION 3.20)
project(archs NONE)
set(SGL_KERNEL_CUDA_FLAGS "-O3" "-gencode=arch=compute_90,code=sm_90" "-gencode=arch=compute_100a,code=sm_100a" "-gencode=arch=compute_120a,code=sm_120a" "--threads=4")
{block}
message(STATUS "FLAGS=${{SGL_KERNEL_CUDA_FLAGS}}")
message(STATUS "LIBS=${{SGL_KERNEL_BUILD_SM90_LIBRARY}}/${{SGL_KERNEL_BUILD_SM100_LIBRARY}}/${{SGL_KERNEL_BUILD_FLASHMLA}}")
"""


@pytest.mark.parametrize(
    ("archs", "flags", "libs"),
    [
        (None, "-O3;-gencode=arch=compute_90,code=sm_90;-gencode=arch=compute_100a,code=sm_100a;"
         "-gencode=arch=compute_120a,code=sm_120a;--threads=4", "ON/ON/ON"),
        ("12.0a", "-O3;--threads=4;-gencode=arch=compute_120a,code=sm_120a", "OFF/ON/OFF"),
        ("9.0a;12.0a", "-O3;--threads=4;-gencode=arch=compute_90a,code=sm_90a;-gencode=arch=compute_120a,code=sm_120a",
         "ON/ON/ON"),
    ],
)
def test_fix5_cmake_block_picks_gencodes_and_libraries(tmp_path, archs, flags, libs):
    defines = [] if archs is None else [f"-DSGL_KERNEL_CUDA_ARCHS={archs}"]
    result = cmake_configure(tmp_path, ARCH_PROJECT.format(block=arch_block()), *defines)
    assert result.returncode == 0, result.stderr
    assert f"FLAGS={flags}\n" in result.stdout
    assert f"LIBS={libs}\n" in result.stdout


def test_fix5_cmake_block_rejects_a_malformed_architecture(tmp_path):
    result = cmake_configure(tmp_path, ARCH_PROJECT.format(block=arch_block()), "-DSGL_KERNEL_CUDA_ARCHS=sm_120")
    assert result.returncode != 0
    assert "'sm_120' is not a CUDA capability" in " ".join(result.stderr.split())


@pytest.fixture()
def patched_load_utils(wheel_python_package, tmp_path):
    """The wheel's load_utils.py with 0005's load_utils.py part applied, imported
    as a plain module; `archs` writes the _build_archs.py a build would install."""
    pytest.importorskip("torch", reason="load_utils.py imports torch: pip install torch (CPU is enough)")
    copy = tmp_path / "tree"
    shutil.copytree(wheel_python_package, copy)
    result = apply(section_text(patch_named("0005"), "python/sgl_kernel/load_utils.py"), copy)
    assert result.returncode == 0, result.stdout + result.stderr
    package_dir = copy / "python" / "sgl_kernel"

    def load(archs: tuple[str, ...] | None):
        build_archs = package_dir / "_build_archs.py"
        if archs is not None:
            build_archs.write_text(f"CUDA_ARCHS = {archs!r}\n")
        elif build_archs.exists():
            build_archs.unlink()
        for name in [m for m in sys.modules if m == "sgl_kernel" or m.startswith("sgl_kernel.")]:
            del sys.modules[name]
        package = importlib.util.module_from_spec(importlib.machinery.ModuleSpec("sgl_kernel", None, is_package=True))
        package.__path__ = [str(package_dir)]
        sys.modules["sgl_kernel"] = package
        return importlib.import_module("sgl_kernel.load_utils")

    yield load
    for name in [m for m in sys.modules if m == "sgl_kernel" or m.startswith("sgl_kernel.")]:
        del sys.modules[name]


def test_fix5_refuses_other_gpus_naming_the_built_architectures(patched_load_utils):
    load_utils = patched_load_utils(("12.0a",))
    load_utils._check_built_architectures(120)  # RTX PRO 6000 Blackwell
    load_utils._check_built_architectures(None)  # no GPU: nothing to refuse
    for capability in (90, 100, 121, 89):
        with pytest.raises(ImportError) as excinfo:
            load_utils._check_built_architectures(capability)
        message = str(excinfo.value)
        assert "built only for CUDA architectures 12.0a" in message
        assert f"sm_{capability}" in message


def test_fix5_compatibility_rules(patched_load_utils):
    load_utils = patched_load_utils(("8.0", "9.0a"))
    load_utils._check_built_architectures(80)
    load_utils._check_built_architectures(86)  # sm_80 cubins run on 8.6
    load_utils._check_built_architectures(90)
    with pytest.raises(ImportError, match=r"8.0, 9.0a"):
        load_utils._check_built_architectures(120)


def test_fix5_upstream_build_is_not_checked(patched_load_utils):
    load_utils = patched_load_utils(None)
    for capability in (80, 90, 100, 120):
        load_utils._check_built_architectures(capability)


# ---------------------------------------------------------------- fixes 6 to 9


def added_block(number: str) -> str:
    """The lines patch NNNN adds (every hunk of 0006-0009 only adds lines)."""
    patch = patch_named(number)
    out = []
    for hunk in file_of(patch, "CMakeLists.txt").hunks:
        assert all(line in hunk.new for line in hunk.old)
        start = next(i for i, (a, b) in enumerate(zip(hunk.old + [None], hunk.new)) if a != b)
        out += hunk.new[start : start + len(hunk.new) - len(hunk.old)]
    return "\n".join(out)


def nvcc_path() -> str:
    found = shutil.which("nvcc") or next((str(p) for p in (CUDA_HOME / "bin" / "nvcc",) if p.is_file()), None)
    if found is None:
        pytest.skip("nvcc (CUDA 13) is not installed here")
    return found


SUBPROJECT = """project(thirdparty LANGUAGES CXX CUDA)
set(CMAKE_CUDA_ARCHITECTURES 80 90)
add_library(mscclpp_obj OBJECT k.cu)
set_target_properties(mscclpp_obj PROPERTIES POSITION_INDEPENDENT_CODE 1)
add_library(mscclpp SHARED)
target_link_libraries(mscclpp PUBLIC mscclpp_obj)
add_library(mscclpp_static STATIC)
target_link_libraries(mscclpp_static PUBLIC mscclpp_obj)
install(TARGETS mscclpp LIBRARY DESTINATION lib)
install(TARGETS mscclpp_static ARCHIVE DESTINATION lib)
install(FILES k.h DESTINATION include)
"""

PARENT = """cmake_minimum_required(VERSION 3.20)
project(parent LANGUAGES CXX CUDA)
set(SGL_KERNEL_CUDA_ARCHS "" CACHE STRING "")
set(repo-mscclpp_SOURCE_DIR "${{CMAKE_CURRENT_SOURCE_DIR}}/thirdparty")
add_subdirectory(${{repo-mscclpp_SOURCE_DIR}} ${{CMAKE_CURRENT_BINARY_DIR}}/mscclpp-build)
{fix6}
add_library(common_ops MODULE ops.cc)
target_link_libraries(common_ops PRIVATE mscclpp_static)
{fix7}
install(TARGETS common_ops LIBRARY DESTINATION sgl_kernel)
"""


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("patched", [False, True])
def test_fix6_fix7_subdirectory_built_for_the_chosen_archs_and_installed_nowhere(tmp_path, patched):
    nvcc = nvcc_path()
    cmake, ninja = require("cmake"), require("ninja")
    sub = tmp_path / "src" / "thirdparty"
    sub.mkdir(parents=True)
    (sub / "CMakeLists.txt").write_text(SUBPROJECT)
    (sub / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\nvoid launch(float* x) { k<<<1, 32>>>(x); }\n")
    (sub / "k.h").write_text("void launch(float* x);\n")
    (tmp_path / "src" / "ops.cc").write_text("void launch(float* x);\nextern \"C\" void ops(float* x) { launch(x); }\n")
    (tmp_path / "src" / "CMakeLists.txt").write_text(PARENT.format(
        fix6=added_block("0006") if patched else "", fix7=added_block("0007") if patched else ""))
    build = tmp_path / "build"
    configure = subprocess.run(
        [cmake, "-S", str(tmp_path / "src"), "-B", str(build), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
         f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DSGL_KERNEL_CUDA_ARCHS=12.0a"],
        capture_output=True, text=True, timeout=600,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    built = subprocess.run([cmake, "--build", str(build)], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    subprocess.run([cmake, "--install", str(build), "--prefix", str(tmp_path / "wheel")], check=True,
                   capture_output=True, timeout=300)
    installed = sorted(str(p.relative_to(tmp_path / "wheel")) for p in (tmp_path / "wheel").rglob("*") if p.is_file())
    commands = subprocess.run([ninja, "-C", str(build), "-t", "commands"], capture_output=True, text=True, check=True).stdout
    compile_k = next(line for line in commands.splitlines() if "k.cu" in line and " -c " in line)
    if patched:
        assert "arch=compute_120a,code=[sm_120a]" in compile_k and "compute_80" not in compile_k
        assert installed == ["sgl_kernel/libcommon_ops.so"]
        assert not (build / "mscclpp-build" / "libmscclpp.so").exists()  # not even built
        assert "-- SGL_KERNEL_CUDA_ARCHS=12.0a: mscclpp CUDA architectures 120a-real" in configure.stdout
    else:  # what sgl-kernel gets without the two patches
        assert "compute_80" in compile_k and "compute_90" in compile_k
        assert installed == ["include/k.h", "lib/libmscclpp.so", "lib/libmscclpp_static.a", "sgl_kernel/libcommon_ops.so"]


POOL_PROJECT = """cmake_minimum_required(VERSION 3.20)
project(pools C)
{fix8}
add_library(ops MODULE heavy.c light.c)
"""


def test_fix8_pools_need_cmake_4_2_and_put_the_listed_sources_in_the_pool(tmp_path):
    ninja = require("ninja")
    for name in ("heavy.c", "light.c"):
        (tmp_path / name).write_text(f"int {name[:-2]}(void) {{ return 1; }}\n")
    body = POOL_PROJECT.format(fix8=added_block("0008"))
    (tmp_path / "CMakeLists.txt").write_text(body)

    def configure(build: str, *defines: str) -> subprocess.CompletedProcess:
        return subprocess.run([require("cmake"), "-S", str(tmp_path), "-B", str(tmp_path / build), "-G", "Ninja",
                               f"-DCMAKE_MAKE_PROGRAM={ninja}", *defines], capture_output=True, text=True, timeout=300)

    plain = configure("plain")
    assert plain.returncode == 0, plain.stderr  # empty: nothing changes
    pooled = configure("pooled", "-DSGL_KERNEL_JOB_POOLS=sgl_kernel_heavy=2",
                       "-DSGL_KERNEL_JOB_POOL_SOURCES=heavy.c=sgl_kernel_heavy,gone.c=sgl_kernel_heavy")
    if cmake_version() < (4, 2):
        assert pooled.returncode != 0
        assert "SGL_KERNEL_JOB_POOLS needs CMake >= 4.2" in " ".join(pooled.stderr.split())
        return
    assert pooled.returncode == 0, pooled.stderr
    assert "no source gone.c in this tree; ignored" in " ".join(pooled.stderr.split())
    rules = (tmp_path / "pooled" / "CMakeFiles" / "rules.ninja").read_text()
    assert "pool sgl_kernel_heavy\n  depth = 2" in rules
    ninja_file = (tmp_path / "pooled" / "build.ninja").read_text()
    heavy_edge = ninja_file[ninja_file.index("heavy.c.o:"):].split("\n\n")[0]
    light_edge = ninja_file[ninja_file.index("light.c.o:"):].split("\n\n")[0]
    assert "pool = sgl_kernel_heavy" in heavy_edge and "pool =" not in light_edge


def test_fix9_installs_the_record_byte_for_byte(tmp_path):
    record = tmp_path / "record.json"
    record.write_bytes(b'{"torch": {"override": "--allow-torch 2.11.0+cu130"}}\n')
    body = "cmake_minimum_required(VERSION 3.20)\nproject(record NONE)\n" + added_block("0009") + "\n"
    done = cmake_configure(tmp_path, body, f"-DSGL_KERNEL_BUILD_INFO_FILE={record}")
    assert done.returncode == 0, done.stderr
    subprocess.run([require("cmake"), "--install", str(tmp_path / "build"), "--prefix", str(tmp_path / "wheel")],
                   check=True, capture_output=True, timeout=300)
    assert (tmp_path / "wheel" / "sgl_kernel" / "_build_info.json").read_bytes() == record.read_bytes()
    missing = cmake_configure(tmp_path / "build", body, f"-DSGL_KERNEL_BUILD_INFO_FILE={tmp_path / 'nope.json'}")
    # CMake wraps its message at a column that moves with the path's length.
    assert missing.returncode != 0 and "does not exist" in " ".join(missing.stderr.split())
