"""Host and Python-environment checks: parsers on the real output captured on the project's H200
device machine (tests/fixtures/doctor/h200-host-raw.txt: nvidia-smi, /proc and pip output captured there on 2026-11-29),
and the real `doctor` on this GPU-less host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from blackwell_stack.data import stack as stack_data
from blackwell_stack.doctor import envcheck, host
from blackwell_stack.doctor.checks import FAIL, OK, WARN
from blackwell_stack.doctor.plan import plan_section

RAW = Path(__file__).parent / "fixtures" / "doctor" / "h200-host-raw.txt"


@pytest.fixture(scope="module")
def device() -> dict[str, str]:
    """Each command's output in the capture, keyed by the command line."""
    out, key = {}, None
    for line in RAW.read_text().splitlines(keepends=True):
        if line.startswith("===== "):
            key = line[6:].strip()
            out[key] = ""
        elif key is not None and not line.startswith("rc="):
            out[key] += line
    return out


def _facts(device) -> host.HostFacts:
    query = next(v for k, v in device.items() if k.startswith("nvidia-smi --query-gpu"))
    gpus = host.parse_gpu_query(query)
    return host.HostFacts(
        driver=gpus[0].driver, driver_source="nvidia-smi", gpus=gpus,
        topology=device["nvidia-smi topo -m"], nvlink_status=device["nvidia-smi nvlink --status"], cpus=16,
    )


def test_gpu_query(device):
    (gpu,) = host.parse_gpu_query(next(v for k, v in device.items() if k.startswith("nvidia-smi --query-gpu")))
    assert (gpu.name, gpu.driver, gpu.compute_cap, gpu.memory_mib) == ("NVIDIA H200", "580.159.04", "9.0", 143771)


def test_proc_driver_version_open_kernel_module(device):
    assert host.parse_proc_driver_version(device["cat /proc/driver/nvidia/version"]) == "580.159.04"


def test_topology_single_gpu(device):
    assert host.parse_topology(device["nvidia-smi topo -m"]) == {"gpus": 1, "links": {}}
    assert host.parse_nvlink_status(device["nvidia-smi nvlink --status"]) == 0


# A DGX A100's matrix as published in NVIDIA/nccl#1505 (its first four rows; NIC columns cut), with the header
# underlined as nvidia-smi writes it into a pipe (the H200 capture above shows the escapes).
DGX_A100 = (
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tCPU Affinity\x1b[0m\n"
    "GPU0\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tPXB\tPXB\t48-63,176-191\n"
    "GPU1\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tNV12\tPXB\tPXB\t48-63,176-191\n"
    "GPU2\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tNV12\tSYS\tSYS\t16-31,144-159\n"
    "GPU3\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tNV12\tSYS\tSYS\t16-31,144-159\n"
)


def test_topology_reads_every_gpu_column_under_the_underlined_header():
    assert host.parse_topology(DGX_A100) == {"gpus": 8, "links": {"NVLink": 28}}
    # One PCIe pair among NVLink ones is what the interconnect check must warn about, in any column.
    mixed = host.parse_topology(DGX_A100.replace("GPU3\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tNV12",
                                                 "GPU3\tNV12\tNV12\tNV12\t X \tNV12\tNV12\tNV12\tSYS"))
    assert mixed == {"gpus": 8, "links": {"NVLink": 27, "SYS": 1}}


def test_checks_on_the_h200(device):
    by_name = {c.name: c for c in host.checks(_facts(device))}
    assert by_name["NVIDIA driver"].status == OK and by_name["NVIDIA driver"].value == "580.159.04"
    assert by_name["GPUs"].status == WARN and "--tp 8" in by_name["GPUs"].message
    cc = by_name["compute capability"]
    assert cc.status == WARN and cc.value == "9.0" and cc.fix
    assert by_name["interconnect"].value == "single GPU"
    for c in by_name.values():
        assert c.status in (OK, WARN, FAIL)
        assert c.status == OK or c.fix, c


def test_old_driver_fails(device):
    facts = _facts(device)
    facts.driver = "570.86.15"
    (driver,) = [c for c in host.checks(facts) if c.name == "NVIDIA driver"]
    assert driver.status == FAIL and ">= 580" in driver.fix


@pytest.mark.parametrize(
    "arch, cc, ptx, runs",
    [
        ("sm_120a", "12.0", False, True),
        ("sm_100a", "12.0", False, False),
        ("sm_90a", "9.0", False, True),
        ("sm_120", "12.1", False, True),
        ("sm_90", "12.0", False, False),
        ("sm_80", "12.0", True, True),
        ("sm_120a", "12.1", True, False),
    ],
)
def test_arch_runs_on(arch, cc, ptx, runs):
    assert envcheck.arch_runs_on(arch, cc, ptx=ptx) is runs


def test_kernel_library_follows_load_utils():
    names = ["sgl_kernel/sm90/common_ops.abi3.so", "sgl_kernel/sm100/common_ops.abi3.so"]
    assert envcheck.kernel_library_for("9.0", names) == ["sgl_kernel/sm90/common_ops.abi3.so"]
    assert envcheck.kernel_library_for("12.0", names) == ["sgl_kernel/sm100/common_ops.abi3.so"]


@pytest.mark.proc
def test_doctor_runs_without_a_driver():
    """On this host (no NVIDIA driver) doctor runs, says so, and prints JSON."""
    r = subprocess.run([sys.executable, "-m", "blackwell_stack", "doctor", "--json"], capture_output=True, text=True,
                       timeout=300)
    assert "Traceback" not in r.stderr
    data = json.loads(r.stdout)
    assert r.returncode == (1 if data["status"] == FAIL else 0)
    checks = {c["name"]: c for c in data["checks"]}
    if data["host"]["driver"] is None:
        assert checks["NVIDIA driver"]["status"] == WARN
        assert "no NVIDIA driver" in checks["NVIDIA driver"]["message"]
    assert {"torch", "flashinfer", "sglang", "memory for a kernel build"} <= set(checks) or "sgl-kernel" in checks
    for c in data["checks"]:
        assert c["status"] in (OK, WARN, FAIL) and (c["status"] == OK or c["fix"]), c


@pytest.mark.proc
def test_doctor_with_a_missing_interpreter():
    r = subprocess.run([sys.executable, "-m", "blackwell_stack", "doctor", "--python", "/nonexistent/python"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "cannot run /nonexistent/python" in r.stderr and "Traceback" not in r.stderr


def test_cpu_only_torch_is_a_failure():
    env = envcheck.Environment()
    torch = env.get("torch")
    if torch is None:
        pytest.skip("no torch installed in this interpreter")
    cuda, _runtime, _lib = envcheck.torch_cuda(torch)
    if cuda is not None:
        pytest.skip(f"the installed torch {torch.version} is a CUDA build")
    (check,) = [c for c in envcheck.checks(env, gpu_cc=None) if c.name == "torch"]
    assert check.status == FAIL and "CPU-only" in check.message and "cu130" in check.fix


def test_plan_section_lists_the_checks():
    stack = stack_data.load()
    section = plan_section(stack, "doctor")
    names = [i.name for i in section.items]
    for expected in ("NVIDIA driver", "GPUs", "compute capability", "interconnect", "torch", "sgl-kernel ABI",
                     "sgl-kernel architectures", "flashinfer", "sglang", "memory for a kernel build"):
        assert expected in names
    assert any(c.startswith("blackwell-stack doctor") for c in section.commands)
    assert section.to_json()["title"] == f"Host checks (doctor) for stack {stack.name}"
