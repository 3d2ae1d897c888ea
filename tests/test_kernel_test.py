"""`blackwell-stack kernel test`: selection, one process per file, crash and timeout isolation, summary, exit code.

Real pytest processes run real (small) test files named like upstream's, so
that the real rules of pkgs/sgl-kernel/kernel-tests.json choose among them;
the wheel under test is a real zip that holds an sgl_kernel package with the
build's `_build_archs.py`. No GPU here: `--gpu` names the capability to
choose for, as it does on a build host.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
import zipfile
from pathlib import Path

import pytest
from support.cli import run, start

from blackwell_stack.data import registry
from blackwell_stack.errors import DataError
from blackwell_stack.kernel.test import runner, selection

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

FILES = {
    "conftest.py": "",
    "utils.py": "def helper():\n    return 1\n",
    # Passes (and shows the wheel under test is the sgl_kernel it imports); one test skips itself.
    "test_norm.py": "import pytest\nimport sgl_kernel\nfrom utils import helper\n\n"
                    "def test_one():\n    assert sgl_kernel.BUILT_FOR == ('9.0a',) and helper() == 1\n\n"
                    "def test_two():\n    assert True\n\n"
                    "def test_skipped():\n    pytest.skip('not on this GPU')\n",
    "test_fp8_gemm.py": "def test_ok():\n    pass\n\ndef test_wrong_numbers():\n    assert 2.4e23 == 1.0\n",
    # A kernel that kills its process: the next files still run, and the test that was running is named.
    "test_merge_state_v2.py": "import os, signal\n\ndef test_a_first():\n    pass\n\n"
                              "def test_b_crash():\n    os.kill(os.getpid(), signal.SIGSEGV)\n\n"
                              "def test_c_never_reached():\n    pass\n",
    # Hangs, with a worker process of its own: both are killed at the time limit.
    "test_sampling.py": "import os, subprocess, sys, time\n\ndef test_hangs():\n"
                        "    worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                        "    with open(os.environ['WORKER_PID_FILE'], 'w') as fh:\n        fh.write(str(worker.pid))\n"
                        "    time.sleep(600)\n",
    "test_copy.py": "def test_broken(:\n    pass\n",
    "test_fp4_gemm.py": "def test_fp4():\n    pass\n",
    "test_cutlass_w4a8_moe_mm.py": "def test_w4a8():\n    pass\n",
    "test_flash_attention.py": "def test_fa3():\n    pass\n",
    "test_custom_allreduce.py": "def test_allreduce():\n    pass\n",
    "test_gguf.py": "def test_gguf():\n    pass\n",
    "test_hadamard.py": "import blackwell_stack_absent_module_for_tests\n\ndef test_h():\n    pass\n",
    "speculative/test_eagle_utils.py": "def test_tree():\n    pass\n",
    # Skips itself while collected, as upstream's test_hadamard.py does when its kernel is gone.
    "test_topk.py": "import pytest\n\npytest.skip('interface removed', allow_module_level=True)\n",
}


@pytest.fixture
def tests_dir(tmp_path) -> Path:
    root = tmp_path / "tests"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def make_wheel(path: Path, archs: tuple[str, ...], libraries=("sm90/common_ops",)) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sgl_kernel/__init__.py", "from sgl_kernel._build_archs import CUDA_ARCHS as BUILT_FOR\n")
        zf.writestr("sgl_kernel/_build_archs.py", f"CUDA_ARCHS = {archs!r}\n")
        for lib in libraries:
            zf.writestr(f"sgl_kernel/{lib}.abi3.so", b"")
        zf.writestr("sgl_kernel-0.3.21.dist-info/METADATA", "Name: sgl-kernel\nVersion: 0.3.21\n")
    return path


cli = functools.partial(run, "kernel", "test")


def skips_for(tests_dir: Path, tmp_path: Path, archs: tuple[str, ...], gpu: str, libraries=("sm90/common_ops",)):
    """(the target probed, {file: skip reason}) for a wheel of `archs` on a GPU of capability `gpu`."""
    site = selection.unpack_wheel(make_wheel(tmp_path / f"w-{gpu}.whl", archs, libraries), tmp_path / f"site-{gpu}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    rules = selection.load_rules()
    imports, checks = selection.chosen(tests_dir, rules)
    target = selection.probe(sys.executable, set().union(*imports.values()), env, gpu)
    return target, {i.name: i.skip for i in selection.select(tests_dir, rules, target, imports, checks)}


def test_selection_by_wheel_architectures_gpus_libraries_and_imports(tests_dir, tmp_path):
    hopper, skips = skips_for(tests_dir, tmp_path, ("9.0a",), "9.0")
    assert hopper.runnable_archs == ["9.0a"] and hopper.libraries == ("common_ops",)
    assert skips["test_norm.py"] is None and skips["test_cutlass_w4a8_moe_mm.py"] is None
    assert skips["test_fp4_gemm.py"].startswith("tests kernels for 10.0a, 10.3a, 11.0a, 12.0a, 12.1a; the wheel runs 9.0a")
    assert skips["gpu_check.py"].startswith("tests kernels for") and "NVFP4" in skips["gpu_check.py"]
    assert skips["test_flash_attention.py"].startswith("the wheel has no flash_ops: FA3")
    assert skips["test_custom_allreduce.py"].startswith("needs 2 GPUs, this host has 1")
    assert "Hugging Face" in skips["test_gguf.py"]
    assert skips["test_hadamard.py"] == f"imports blackwell_stack_absent_module_for_tests, not installed for {sys.executable}"
    # The same files for an SM120 wheel on an SM120 GPU: the FP4 tests and the project's NVFP4 check run, Hopper's not.
    _blackwell, skips = skips_for(tests_dir, tmp_path, ("12.0a",), "12.0", libraries=("sm100/common_ops",))
    assert skips["test_fp4_gemm.py"] is None and skips["gpu_check.py"] is None
    assert skips["test_cutlass_w4a8_moe_mm.py"].startswith("tests kernels for 9.0a; the wheel runs 12.0a")


@pytest.mark.parametrize("arch, capability, runs", [
    ("9.0a", "9.0", True), ("12.0a", "12.1", False), ("12.0", "12.1", True), ("10.0", "12.0", False),
    ("8.0", "8.9", True), ("8.9", "8.0", False), ("10.0a", "10.0", True),
])
def test_runs_on_is_load_utils_rule(arch, capability, runs):
    assert selection.runs_on(arch, capability) is runs


def test_each_file_in_its_own_process_crash_and_timeout_isolated(tests_dir, tmp_path):
    wheel = make_wheel(tmp_path / "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl", ("9.0a",))
    pid_file = tmp_path / "worker.pid"
    logs = tmp_path / "logs"
    result = cli("--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0", "--timeout", "8", "--json",
                 "--logs", str(logs), env={**os.environ, "WORKER_PID_FILE": str(pid_file)})
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    files = {f["name"]: f for f in report["files"]}
    counts = {name: (f["status"], f["passed"], f["failed"], f["skipped"], f["errors"]) for name, f in files.items()}
    assert counts["test_norm.py"] == ("passed", 2, 0, 1, 0)
    assert counts["test_fp8_gemm.py"] == ("failed", 1, 1, 0, 0)
    assert files["test_fp8_gemm.py"]["failures"] == ["test_fp8_gemm.py::test_wrong_numbers"]
    assert counts["test_merge_state_v2.py"] == ("crashed", 1, 1, 0, 0)
    assert files["test_merge_state_v2.py"]["note"] == "killed by SIGSEGV (signal 11) in test_merge_state_v2.py::test_b_crash"
    assert counts["test_sampling.py"] == ("timed out", 0, 1, 0, 0) and files["test_sampling.py"]["note"].startswith("killed after 8 s in ")
    assert counts["test_copy.py"][0] == "error" and files["test_copy.py"]["errors"] == 1
    # Files after the crash and the timeout still ran, in their own processes.
    assert counts["speculative/test_eagle_utils.py"] == ("passed", 1, 0, 0, 0)
    assert counts["test_cutlass_w4a8_moe_mm.py"][0] == "passed"
    assert {files[n]["status"] for n in ("test_fp4_gemm.py", "gpu_check.py", "test_gguf.py", "test_hadamard.py")} == {"skipped"}
    assert counts["test_topk.py"] == ("skipped", 0, 0, 1, 0) and "skipped itself" in files["test_topk.py"]["note"]
    assert report["totals"] == {"passed": 6, "failed": 3, "skipped": 2, "errors": 1, "files_run": 7,
                                "files_skipped": 7, "files_failed": 4}
    assert report["ok"] is False and report["target"]["wheel_archs"] == ["9.0a"]
    # The hanging file's worker went with it: its whole process group was killed.
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{worker}").exists() and "Z" not in _state(worker):
        time.sleep(0.2)
    assert not Path(f"/proc/{worker}").exists() or "Z" in _state(worker)
    # What was found is kept, also for a run that is cut short: the logs and the summary so far.
    assert json.loads((logs / "summary.json").read_text()) == report
    assert "SIGSEGV" not in (logs / "test_norm.py.log").read_text()
    assert (logs / "speculative__test_eagle_utils.py.log").is_file()


def test_an_interrupted_run_keeps_what_it_found_and_stops_the_file_it_ran(tests_dir, tmp_path):
    wheel = make_wheel(tmp_path / "k.whl", ("9.0a",))
    pid_file, logs = tmp_path / "worker.pid", tmp_path / "logs"
    child = start("kernel", "test", "--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0", "--logs", str(logs),
                  "--file", "test_norm.py", "--file", "test_sampling.py", env={**os.environ, "WORKER_PID_FILE": str(pid_file)})
    deadline = time.monotonic() + 120
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    summary = json.loads((logs / "summary.json").read_text())
    assert [(f["name"], f["status"]) for f in summary["files"]] == [("test_norm.py", "passed"), ("test_sampling.py", "interrupted")]
    worker = int(pid_file.read_text())
    while time.monotonic() < deadline and Path(f"/proc/{worker}").exists() and "Z" not in _state(worker):
        time.sleep(0.2)
    assert not Path(f"/proc/{worker}").exists() or "Z" in _state(worker)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_run_that_passes_exits_zero_with_a_summary(tests_dir, tmp_path):
    wheel = make_wheel(tmp_path / "k.whl", ("9.0a",))
    result = cli("--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0",
                 "--file", "speculative/test_eagle_utils.py", "--file", "test_norm.py", "--file", "gpu_check.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 file(s) run, 1 skipped; tests: 3 passed, 0 failed, 1 skipped, 0 errors: all passed" in " ".join(result.stdout.split())
    again = cli("--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0", "--json",
                "--file", "speculative/test_eagle_utils.py", "--file", "test_norm.py", "--file", "gpu_check.py")
    report = json.loads(again.stdout)
    assert [(f["name"], f["status"]) for f in report["files"]] == [
        ("speculative/test_eagle_utils.py", "passed"), ("test_norm.py", "passed"), ("gpu_check.py", "skipped")]
    assert again.returncode == 0 and report["ok"] is True


def test_failure_report_names_the_tests_and_shows_the_log(tests_dir, tmp_path):
    wheel = make_wheel(tmp_path / "k.whl", ("9.0a",))
    result = cli("--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0", "--file", "test_fp8_gemm.py")
    assert result.returncode == 1
    assert "test_fp8_gemm.py::test_wrong_numbers" in result.stdout and "| " in result.stdout
    assert "1 file(s) FAILED" in result.stdout


def test_a_wheel_without_kernels_for_the_gpu_is_refused(tests_dir, tmp_path):
    wheel = make_wheel(tmp_path / "k.whl", ("12.0a",), ("sm100/common_ops",))
    result = cli("--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0")
    assert result.returncode == 1
    assert "built for 12.0a, and none of those runs on this GPU (9.0)" in " ".join(result.stderr.split())
    assert "--arch 9.0a" in result.stderr


def test_dry_run_shows_the_selection_and_runs_nothing(tests_dir, tmp_path):
    wheel = make_wheel(tmp_path / "k.whl", ("9.0a",))
    result = cli("--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0", "--dry-run", "--json",
                 env={**os.environ, "WORKER_PID_FILE": str(tmp_path / "never")})
    assert result.returncode == 0
    shown = {f["name"]: f for f in json.loads(result.stdout)["files"]}
    assert shown["test_sampling.py"]["run"] and not shown["test_fp4_gemm.py"]["run"]
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("args, text", [
    ([], "no tests to run"),
    (["--tests", "/nonexistent-dir"], "is not a directory"),
    (["--gpu", "nine"], "is not a compute capability"),
])
def test_bad_arguments_are_refused_with_a_hint(tests_dir, args, text):
    if args[:1] == ["--gpu"]:
        args = ["--tests", str(tests_dir), *args]
    result = cli(*args)
    assert result.returncode == 2 and text in result.stderr and "Traceback" not in result.stderr


def test_unknown_file_and_missing_package_are_named(tests_dir, tmp_path):
    wheel = make_wheel(tmp_path / "k.whl", ("9.0a",))
    result = cli("--tests", str(tests_dir), "--wheel", str(wheel), "--gpu", "9.0", "--file", "test_nope.py")
    assert result.returncode == 2 and "no test file test_nope.py" in result.stderr
    result = cli("--tests", str(tests_dir), "--gpu", "9.0")  # no --wheel, and none installed here
    assert result.returncode == 2 and "sgl_kernel is not installed" in result.stderr


def test_rules_are_checked(tmp_path):
    real = json.loads(registry.path("kernel-tests").read_text())
    assert selection.load_rules()["files"]["test_flash_attention.py"]["needs_libraries"] == ["flash_ops"]
    for mutate, named in (
        (lambda d: d["files"].__setitem__("test_x.py", {"needs_archs": ["9.0"]}), "why"),
        (lambda d: d["files"].__setitem__("test_x.py", {"needs_archs": ["sm90"], "why": "x"}), "needs_archs"),
        (lambda d: d["files"].__setitem__("test_x.py", {"needs_gpus": 0, "why": "x"}), "needs_gpus"),
        (lambda d: d["project_checks"].__setitem__("nope.py", {"why": "x"}), "nope.py"),
    ):
        data = json.loads(json.dumps(real))
        mutate(data)
        path = tmp_path / "rules.json"
        path.write_text(json.dumps(data))
        with pytest.raises(DataError) as exc:
            selection.load_rules(path)
        assert named in exc.value.message


def test_outcomes_of_a_cut_short_file_are_read(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in [
        {"event": "start", "id": "t.py::a"}, {"event": "report", "id": "t.py::a", "when": "setup", "outcome": "passed"},
        {"event": "report", "id": "t.py::a", "when": "call", "outcome": "passed"},
        {"event": "report", "id": "t.py::a", "when": "teardown", "outcome": "passed"}, {"event": "end", "id": "t.py::a"},
        {"event": "start", "id": "t.py::b"}, {"event": "report", "id": "t.py::b", "when": "setup", "outcome": "failed"},
        {"event": "end", "id": "t.py::b"}, {"event": "start", "id": "t.py::c"},
    ]) + '\n{"event": "rep')
    got = runner.read_outcomes(path)
    assert got.tests == {"t.py::a": "passed", "t.py::b": "error", "t.py::c": "failed"}
    assert got.running == "t.py::c" and got.status is None


def test_smoke_runs_the_bounded_subset_of_the_rules(tmp_path):
    """--smoke chooses the files named in kernel-tests.json's `smoke`, in that order, with gpu_check.py; the
    NVFP4 files run only where the wheel has SM100/SM120 kernels, as the rules say for any run."""
    smoke = selection.load_rules()["smoke"]
    root = tmp_path / "tests"
    root.mkdir()
    for name in smoke["files"]:
        if name.startswith("test_"):
            (root / name).write_text("def test_ok():\n    pass\n")
    wheel = make_wheel(tmp_path / "k.whl", ("12.0a",), ("sm100/common_ops",))
    result = cli("--tests", str(root), "--wheel", str(wheel), "--gpu", "12.0", "--smoke", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)["files"]
    assert [f["name"] for f in shown] == smoke["files"] and all(f["run"] for f in shown)
    result = cli("--tests", str(root), "--wheel", str(wheel), "--gpu", "9.0", "--smoke", "--file", "test_norm.py")
    assert result.returncode == 2 and "--smoke and --file" in result.stderr
