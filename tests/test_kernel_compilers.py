"""`kernel build` tries its compilers before it compiles (kernel/build/compilers.py), and pins the ones it tried.

The trap that crashed SGLang: the build machine's environment named a GCC that links libstdc++
statically. A wrapper that gives the distribution's g++ `-static-libstdc++` links exactly that way (the
same library signature, tests/test_cxx_runtime.py); it stands in for that GCC, and the distribution's
own g++ for the fix. Real compilers, real links, the real CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from support.kernel_probe import minimal_checkout

from blackwell_stack.kernel.build import compilers

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process


@pytest.fixture
def static_gxx(tmp_path) -> Path:
    real = shutil.which("g++")
    if real is None:
        pytest.skip("g++ is needed (scripts/setup-system installs it)")
    wrapper = tmp_path / "static-gcc" / "g++"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {real} -static-libstdc++ "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_a_compiler_that_links_its_own_runtime_is_refused_and_the_distributions_is_taken(static_gxx):
    env = {"PATH": os.environ["PATH"], "CXX": str(static_gxx)}
    found = {c.role.name: c for c in compilers.find(env)}
    cxx, host = found["c++"], found["cuda host c++"]
    assert not cxx.ok and "carries its own C++ runtime" in (cxx.problem or "") and "links libstdc++ statically" in cxx.problem
    assert not host.ok and host.chosen_by.startswith("the c++ compiler")  # nvcc would link with the same one
    assert found["c"].ok
    assert compilers.defines(list(found.values())) == {"CMAKE_C_COMPILER": found["c"].path}

    good = {c.role.name: c for c in compilers.find({"PATH": os.environ["PATH"], "CXX": "g++", "CUDAHOSTCXX": "g++"})}
    assert all(c.ok for c in good.values())
    described = good["c++"].describe()
    assert described.startswith("gcc ") and shutil.which("g++") in described and "libstdc++.so /" in described
    assert compilers.defines(list(good.values()))["CMAKE_CUDA_HOST_COMPILER"] == shutil.which("g++")
    assert set(compilers.record(list(good.values()))) == {"c", "c++", "cuda host c++"}


def test_a_compiler_variable_with_flags_or_no_program_is_named():
    found = {c.role.name: c for c in compilers.find({"PATH": os.environ["PATH"], "CXX": "g++ -m32",
                                                     "CUDAHOSTCXX": "no-such-compiler-here"})}
    assert not found["c++"].ok and "holds more than a compiler" in (found["c++"].problem or "")
    assert not found["cuda host c++"].ok and "no such program" in (found["cuda host c++"].problem or "")


def dry_run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "blackwell_stack", "kernel", "build", "--src", str(minimal_checkout(tmp_path)), "--dry-run",
         "--json", "--out", str(tmp_path / "dist"), "--python", sys.executable],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, **env})


def test_the_build_stops_on_such_a_compiler_before_anything_compiles(tmp_path, static_gxx):
    result = dry_run(tmp_path, CXX=str(static_gxx))
    plan = json.loads(result.stdout)
    cxx = next(c for c in plan["checks"] if c["name"] == "c++ compiler")
    assert not cxx["ok"] and "CXX=/usr/bin/g++" in cxx["fix"] and str(static_gxx) in cxx["found"]
    toolchain = [b for b in plan["blockers"] if "toolchain" in b["message"]]
    assert toolchain and "[BAD] c++ compiler" in toolchain[0]["message"] and "[BAD] cuda host c++" in toolchain[0]["message"]
    assert result.returncode != 0 and not (tmp_path / "dist").exists()


def test_the_compilers_tried_are_the_ones_cmake_gets_and_the_record_names(tmp_path):
    gxx, gcc = shutil.which("g++"), shutil.which("gcc")
    if not (gxx and gcc):
        pytest.skip("gcc and g++ are needed")
    plan = json.loads(dry_run(tmp_path, CXX=gxx, CC=gcc, CUDAHOSTCXX=gxx).stdout)
    assert plan["defines"]["CMAKE_CXX_COMPILER"] == gxx and plan["defines"]["CMAKE_CUDA_HOST_COMPILER"] == gxx
    assert plan["defines"]["CMAKE_C_COMPILER"] == gcc
    assert plan["environment"]["CXX"] == gxx and plan["environment"]["CUDAHOSTCXX"] == gxx
    assert f"--config-settings=cmake.define.CMAKE_CXX_COMPILER={gxx}" in plan["command"]
    toolchain = plan["build_info"]["toolchain"]
    assert toolchain["c++"].startswith("gcc ") and gxx in toolchain["c++"] and "libstdc++.so" in toolchain["c++"]
    assert plan["conditions"]["c++"] == toolchain["c++"] and plan["conditions"]["cuda host c++"] == toolchain["c++"]
