"""A tiny real scikit-build-core project shaped like sgl-kernel, and a build plan for it.

It compiles one C library into `sgl_kernel/`, records what the recipe handed
CMake in `sgl_kernel/seen.txt`, and installs the build record with patch
0009's own CMake lines: `kernel build`'s runner and its reference verdict are
tested on a real wheel from a real build, in seconds.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from blackwell_stack.kernel.inputs import recipe
from blackwell_stack.paths import data_path

_PROBE_CMAKE = """cmake_minimum_required(VERSION 3.15)
project(probe LANGUAGES C)
add_library(probe MODULE probe.c)
file(WRITE "${CMAKE_BINARY_DIR}/seen.txt"
  "archs=${SGL_KERNEL_CUDA_ARCHS} threads=${SGL_KERNEL_COMPILE_THREADS} fp4=${SGL_KERNEL_ENABLE_FP4} "
  "env=$ENV{TORCH_CUDA_ARCH_LIST} jobs=$ENV{CMAKE_BUILD_PARALLEL_LEVEL}\\n")
install(TARGETS probe LIBRARY DESTINATION sgl_kernel)
install(FILES "${CMAKE_BINARY_DIR}/seen.txt" DESTINATION sgl_kernel)
"""

DEFAULT_RECORD = '{"torch": {"override": "--allow-torch 2.11.0+cu130"}}\n'


def _patch_0009_cmake() -> str:
    """The CMake lines patch 0009 adds to sgl-kernel (the build record's install rule)."""
    (path,) = data_path("patches", "sgl-kernel").glob("0009-*.patch")
    return "\n".join(line[1:] for line in path.read_text().splitlines() if line.startswith("+") and not line.startswith("+++"))


def probe_project(root: Path, c_source: str) -> Path:
    kdir = root / "sgl-kernel"
    (kdir / "python" / "sgl_kernel").mkdir(parents=True)
    (kdir / "CMakeLists.txt").write_text(_PROBE_CMAKE + _patch_0009_cmake() + "\n")
    (kdir / "probe.c").write_text(c_source)
    (kdir / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "sgl-kernel"\nversion = "0.3.21"\n'
        '[tool.scikit-build]\nwheel.packages = []\nninja.make-fallback = false\n'
    )
    return kdir


def probe_plan(kdir: Path, out: Path, record: str = DEFAULT_RECORD):
    """A build plan for the probe project as make_plan would make it (two cores, memory to spare)."""
    from blackwell_stack.kernel import jobs
    from blackwell_stack.kernel.build import prepare, staging

    pytest.importorskip("scikit_build_core", reason="pip install scikit-build-core (a test dependency)")
    if not (shutil.which("cmake") and shutil.which("ninja")):
        pytest.skip("cmake and ninja are needed")
    rec = recipe.load()
    job_plan = jobs.plan(cores=2, available_mib=10**6, rule=jobs.rule_from_recipe(rec), archs=1)
    planned = {**job_plan.environment(), **job_plan.defines()}
    host = jobs.Host(2, 10**6, None, 0, "test")
    source = prepare.SourceCheck(kdir, "0.3.21")
    defines = {**recipe.defines(rec, None, planned), "SGL_KERNEL_BUILD_INFO_FILE": out / "sgl-kernel-build-info.json"}
    settings = [f"cmake.define.{name}={value}" for name, value in sorted(defines.items())]
    # Each probe build stages in a directory of its own (two of them may run one after the other in a test).
    stage = staging.Layout(kdir.parent / "stage")
    command = prepare.wheel_command(sys.executable, stage.kernel_dir, out, settings)
    return prepare.BuildPlan(
        source, "12.0a", job_plan, host, recipe.defines(rec, None, planned), recipe.environment(rec, None, planned),
        command, out, out / "prepare.log", [], [], series=[], build_dir=stage.build_dir, stage=stage, build_info=record,
    )


def minimal_checkout(tmp_path: Path) -> Path:
    """The least of an sglang checkout that `kernel build` accepts as one (its sgl-kernel tree, version 0.3.21)."""
    tree = tmp_path / "sglang" / "sgl-kernel"
    (tree / "python" / "sgl_kernel").mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("project(sgl-kernel)\n")
    (tree / "pyproject.toml").write_text('[project]\nname = "sgl-kernel"\nversion = "0.3.21"\n')
    return tmp_path / "sglang"
