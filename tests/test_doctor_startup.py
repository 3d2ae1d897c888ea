"""`doctor`'s check of SGLang's start-up imports (doctor/startup.py, doctor/startup-imports.json).

The list is read from the real sglang wheels (each entry's line is that wheel's line); each import runs in
a child process of the real interpreter, so a crash is named with its signal and a missing module by its
name; `doctor --python` on a venv with the real sglang 0.5.9 wheel lists every start-up import it lacks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

from blackwell_stack.data import registry
from blackwell_stack.doctor import startup

WHEELS = {"0.5.9": "sglang-0.5.9-py3-none-any.whl", "0.5.23": "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl"}


@pytest.mark.network
@pytest.mark.parametrize("version", sorted(WHEELS))
def test_each_entry_is_the_line_of_the_real_wheel_that_imports_it(version, pypi_file):
    data = registry.load("startup-imports")
    with zipfile.ZipFile(pypi_file("sglang", version, WHEELS[version])) as zf:
        for entry in data["sglang"][version]:
            src = entry["source"]
            lines = zf.read(src["file"]).decode().splitlines()
            assert lines[src["line"] - 1].strip() == src["text"], (version, entry["module"])
            if entry["module"].startswith("sglang."):
                zf.getinfo(entry["module"].replace(".", "/") + ".py")  # the module is in the wheel


def test_the_list_follows_the_gpu_the_model_and_the_profiles_environment():
    names = lambda imports: [s.module for s in imports]  # noqa: E731
    qwen = "Qwen3_5MoeForConditionalGeneration"
    on_sm120 = names(startup.imports_for("0.5.9", architecture=qwen, gpu_cc="12.0", env={"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}))
    # 0.5.9 imports deep_gemm before it reads the variable: the profile's "0" does not avoid it.
    assert on_sm120 == ["sgl_kernel", "deep_gemm", "sglang.srt.models.qwen3_5", "sglang.srt.multimodal.processors.qwen_vl"]
    assert "deep_gemm" not in names(startup.imports_for("0.5.9", architecture=qwen, gpu_cc="8.9", env={}))
    assert names(startup.imports_for("0.5.9", architecture="LlamaForCausalLM", gpu_cc=None, env={})) == \
        ["sgl_kernel", "deep_gemm"]
    # 0.5.23 reads it first.
    assert "deep_gemm" not in names(startup.imports_for("0.5.23", architecture=qwen, gpu_cc="12.0",
                                                        env={"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}))
    assert startup.imports_for("0.4.0", architecture=qwen, gpu_cc="12.0", env={}) is None


@pytest.mark.proc
def test_a_crash_is_named_with_its_signal_and_a_missing_module_by_its_name(tmp_path):
    (tmp_path / "crashes_on_import.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    (tmp_path / "needs_decord.py").write_text("from decord import VideoReader\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('no GPU found')\n")
    env = {"PYTHONPATH": str(tmp_path)}
    crashed = startup.import_in_child(sys.executable, "crashes_on_import", env)
    assert crashed.outcome == startup.CRASHED and "SIGSEGV (signal 11)" in crashed.detail
    assert "crashes_on_import.py" in crashed.detail  # faulthandler's frame
    missing = startup.import_in_child(sys.executable, "needs_decord", env)
    assert missing.outcome == startup.MISSING and "'decord'" in missing.detail
    error = startup.import_in_child(sys.executable, "raises", env)
    assert error.outcome == startup.ERROR and "RuntimeError: no GPU found" in error.detail
    assert startup.import_in_child(sys.executable, "json", env).outcome == startup.IMPORTED
    (tmp_path / "never_returns.py").write_text("import signal\nsignal.pause()\n")
    hung = startup.import_in_child(sys.executable, "never_returns", env, timeout=3)
    assert hung.outcome == startup.TIMED_OUT and "did not finish within 3 s" in hung.detail


@pytest.mark.network
@pytest.mark.slow
def test_doctor_lists_what_the_environment_cannot_import(pypi_file, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = next(venv.glob("lib/python3.*/site-packages"))
    with zipfile.ZipFile(pypi_file("sglang", "0.5.9", WHEELS["0.5.9"])) as zf:
        zf.extractall(site)  # the real sglang 0.5.9 and its metadata, none of its dependencies
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "doctor", "--python", str(venv / "bin" / "python"),
                             "--json"], capture_output=True, text=True, timeout=900, cwd=REPO)
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"] if c["group"] == "startup"}
    assert set(checks) >= {"import sgl_kernel", "import deep_gemm", "import sglang.srt.models.qwen3_5",
                           "import sglang.srt.multimodal.processors.qwen_vl"}
    assert checks["import sgl_kernel"]["status"] == "fail" and "'sgl_kernel'" in checks["import sgl_kernel"]["message"]
    assert all(c["value"] == startup.MISSING for c in checks.values())
    assert result.returncode == 1
    skipped = subprocess.run([sys.executable, "-m", "blackwell_stack", "doctor", "--python", str(venv / "bin" / "python"),
                              "--json", "--no-imports"], capture_output=True, text=True, timeout=900, cwd=REPO)
    assert not [c for c in json.loads(skipped.stdout)["checks"] if c["group"] == "startup"]


def test_the_list_is_data_of_the_package():
    path = registry.path("startup-imports")
    assert path == REPO / "src" / "blackwell_stack" / "doctor" / "startup-imports.json" and Path(path).is_file()
