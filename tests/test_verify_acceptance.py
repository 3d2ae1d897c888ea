"""The acceptance run (`acceptance`, verify/acceptance*.py) on the CPU, and `plan --report` reading its report.

The server is verify_server.FaultServer, shared by the module: `gsm8k` answers
GSM8K with its reference solutions and smoke's prompts soundly; `stall`
never answers. This machine has no GPU and its Python no SGLang: doctor, the
kernel and bench fail here, and that is a verdict in the report, not a crash.
The --python given is this interpreter without site-packages (`python -S`),
so that those steps fail at once and the same way on every machine.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import pytest
from support import cli as cli_process
from support.verify_server import FaultServer, free_port
from test_verify_accuracy import data_dir

from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.profile import load_profile
from blackwell_stack.errors import ExitCode
from blackwell_stack.hashes import sha256_file
from blackwell_stack.verify import acceptance_report

pytestmark = pytest.mark.proc
BOUND_S = 300  # a hang fails the test here; every run below needs seconds
ROOT = Path(__file__).resolve().parents[1]
STEPS = ["doctor", "stack doctor", "kernel import", "kernel test", "server", "smoke", "accuracy", "bench"]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("python") / "python-without-site"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture(scope="module")
def gsm8k_server():
    with FaultServer("gsm8k", data=data_dir()) as server:
        yield server.url


def acceptance(*args: str, python: str, report: Path):
    return cli_process.run("acceptance", "--python", python, "--questions", "20", "--gsm8k-data", str(data_dir()),
                           "--bench-levels", "1", "--report-dir", str(report), *args, timeout=BOUND_S)


@pytest.fixture(scope="module")
def url_run(gsm8k_server, bare_python, tmp_path_factory):
    report = tmp_path_factory.mktemp("url-run") / "report"
    result = acceptance("--url", gsm8k_server, "--json", python=bare_python, report=report)
    return result, report


def test_against_a_running_server_each_step_has_a_verdict_and_the_report_is_written(url_run):
    result, report = url_run
    assert result.returncode == ExitCode.CHECK_FAILED, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    data = json.loads((report / "report.json").read_text())
    assert json.loads(result.stdout) == data
    verdicts = {s["name"]: s["verdict"] for s in data["steps"]}
    assert list(verdicts) == STEPS
    assert verdicts == {"doctor": "failed", "stack doctor": "failed", "kernel import": "failed",
                        "kernel test": "skipped", "server": "passed", "smoke": "passed", "accuracy": "passed",
                        "bench": "failed"}
    steps = {s["name"]: s for s in data["steps"]}
    assert steps["accuracy"]["evidence"].startswith("accuracy 1.000 (20 of 20), threshold")
    assert "has no sglang" in steps["bench"]["evidence"]
    assert all(s["bound_s"] and s["seconds"] >= 0 for s in data["steps"])
    assert (data["schema"], data["schema_version"], data["ok"]) == (acceptance_report.SCHEMA, 1, False)
    stack = stack_data.load(None)
    assert (data["stack"], data["profile"], data["lock_sha256"]) == (
        stack.name, stack.profiles[0], sha256_file(stack.lock_path))
    assert data["mode"] == "url" and data["model"] == "fault-gsm8k" and data["host"] and data["date"]
    assert set(data["versions"]) >= {"sglang", "torch", "flashinfer-python", stack.kernel["package"], "locked"}
    for name in ("doctor.json", "smoke.json", "accuracy.json"):
        assert json.loads((report / name).read_text())
    summary = (report / "report.md").read_text()
    assert summary.startswith("# Acceptance run: FAILED") and "| accuracy | passed |" in summary
    assert [p.name for p in report.parent.iterdir()] == ["report"]  # nothing else, no temporary directory


def test_a_server_that_never_gets_ready_skips_the_steps_that_need_it(bare_python, tmp_path):
    """`serve run` with a Python without SGLang exits at once: the server step fails with why, and smoke, the gate
    and bench are skipped."""
    report = tmp_path / "report"
    result = acceptance("--set", f"port={free_port()}", "--bound", "server=60", python=bare_python, report=report)
    assert result.returncode == ExitCode.CHECK_FAILED, result.stderr[-3000:]
    data = json.loads((report / "report.json").read_text())
    steps = {s["name"]: s for s in data["steps"]}
    assert steps["server"]["verdict"] == "failed" and "serve run exited (6)" in steps["server"]["evidence"]
    assert "has no sglang" in steps["server"]["evidence"] and (report / "server.log").is_file()
    for name in ("smoke", "accuracy", "bench"):
        assert steps[name]["verdict"] == "skipped" and "the server is not ready" in steps[name]["evidence"]
    assert "| smoke | skipped |" in result.stdout


def test_a_server_that_stalls_stops_each_step_at_its_bound(bare_python, tmp_path):
    """Each step is stopped by its own time bound or by the step's (whichever comes first: both end it)."""
    report = tmp_path / "report"
    with FaultServer("stall") as server:
        result = acceptance("--url", server.url, "--bound", "smoke=2", "--bound", "accuracy=3", python=bare_python,
                            report=report)
    assert result.returncode == ExitCode.CHECK_FAILED, result.stderr[-3000:]
    steps = {s["name"]: s for s in json.loads((report / "report.json").read_text())["steps"]}
    assert steps["server"]["verdict"] == "passed"
    assert (steps["smoke"]["verdict"], steps["accuracy"]["verdict"]) == ("failed", "failed")
    assert re.search("ran past its bound of 3 s|incomplete: 20 of 20 questions got no answer",
                     steps["accuracy"]["evidence"]), steps["accuracy"]
    assert re.search("ran past its bound of 2 s|no answer", steps["smoke"]["evidence"]), steps["smoke"]
    assert (steps["smoke"]["bound_s"], steps["accuracy"]["bound_s"]) == (2, 3)


def test_a_signal_stops_the_run_and_its_step_and_the_report_says_so(bare_python, tmp_path):
    report = tmp_path / "report"
    with FaultServer("stall") as server:
        child = cli_process.start("acceptance", "--url", server.url, "--python", bare_python, "--report-dir",
                                  str(report), "--bound", "smoke=600")
        assert child.stderr is not None
        for line in child.stderr:
            if line.startswith("acceptance: smoke: at most"):
                break
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=BOUND_S)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    steps = json.loads((report / "report.json").read_text())["steps"]
    assert steps[-1]["name"] == "stopped" and "interrupted" in steps[-1]["evidence"]


# ---------------------------------------------------------------- plan --report


def plan(*args: str):
    return cli_process.run("plan", "--json", *args, timeout=BOUND_S)


def _on_target(report: dict) -> dict:
    """The report as a run on the profile's deployment writes it: its GPUs, its model."""
    profile = load_profile(report["profile"]).data
    gpu = {"name": profile["hardware"]["gpu_name"], "compute_cap": profile["hardware"]["compute_capability"]}
    return {**report, "gpus": [gpu] * profile["hardware"]["gpus"], "model": profile["model"]["id"]}


def _gate(result) -> dict:
    return next(i for i in json.loads(result.stdout)["sections"]["verify"]["items"] if i["name"] == "accuracy gate")


def test_plan_marks_what_the_report_verified_and_refuses_other_versions(url_run, tmp_path):
    _result, report = url_run
    written = json.loads((report / "report.json").read_text())
    # As written on this machine (no GPU, a scripted server's model): it stands for no item of the deployment.
    result = plan("--report", str(report / "report.json"))
    assert result.returncode == 0, result.stderr
    assert ("verify: refused, the report is not of this deployment: it ran on 0 GPU(s) of compute capability -, "
            "not 8 of 12.0; its model fault-gsm8k is not nvidia/Qwen3.5-397B-A17B-NVFP4") in result.stderr
    assert _gate(result)["needs"] == "gpu-host"
    # From the deployment's GPUs and model: what passed is verified, by that report.
    (tmp_path / "target.json").write_text(json.dumps(_on_target(written)))
    result = plan("--report", str(tmp_path / "target.json"))
    assert result.returncode == 0 and "refused" not in result.stderr, result.stderr
    shown = json.loads(result.stdout)
    gate = _gate(result)
    assert gate["needs"] is None and gate["checked_by"].startswith("verified by the acceptance run on ")
    assert gate["checked_by"].endswith(f"(report sha256 {shown['report']['sha256'][:16]})")
    driver = next(i for i in shown["sections"]["doctor"]["items"] if i["name"] == "NVIDIA driver")
    assert driver["needs"] == "gpu-host" and "doctor: overall fail" in driver["note"]  # it failed: still waiting
    # Another lock: refused, saying what differs.
    (tmp_path / "other.json").write_text(json.dumps({**_on_target(written), "lock_sha256": "0" * 64}))
    result = plan("--report", str(tmp_path / "other.json"))
    assert result.returncode == 0, result.stderr
    assert "verify: refused, the report is not of this deployment: its uv.lock had sha256 0000000000000000" in result.stderr
    assert _gate(result)["needs"] == "gpu-host"


def test_plan_refuses_the_gpu_machines_run_for_the_deployment():
    """The acceptance run recorded on the H200 (benchmarks/sglang-gpu/) passed smoke and bench with a stand-in
    model: it verifies the commands, not the SM120 deployment, and plan says so."""
    recorded = ROOT / "benchmarks/sglang-gpu/results/h200-9.0a-acceptance/acceptance/report.json"
    result = plan("--report", str(recorded))
    assert result.returncode == 0, result.stderr
    assert "doctor: refused, the report is not of this deployment: it ran on 1 GPU(s) of compute capability 9.0, " \
           "not 8 of 12.0\n" in result.stderr
    assert "its model /tmp/sglang-gpu/models/attentive is not nvidia/Qwen3.5-397B-A17B-NVFP4" in result.stderr
    assert json.loads(result.stdout)["report"]["verified"] == 0
