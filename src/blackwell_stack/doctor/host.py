"""Host checks: NVIDIA driver, GPUs and compute capability, interconnect, memory for a kernel build.

Reads `nvidia-smi` (query mode, `topo -m`, `nvlink --status`) and /proc; no CUDA library is loaded, so it runs the
same on a build host without a GPU, where it says that the GPU checks could not run.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.doctor.checks import FAIL, OK, WARN, Check
from blackwell_stack.errors import StackError
from blackwell_stack.kernel import jobs
from blackwell_stack.kernel.inputs import recipe as kernel_recipe

# CUDA 13.0 needs an R580 driver or newer (CUDA 13.0 release notes, minimum driver 580.65.06 on Linux).
MIN_DRIVER_MAJOR = 580
TARGET_CC = "12.0"
TARGET_GPUS = 8

GPU_QUERY = "index,name,driver_version,compute_cap,memory.total,pci.bus_id"


@dataclass
class Gpu:
    index: int
    name: str
    driver: str
    compute_cap: str
    memory_mib: int | None
    bus_id: str


@dataclass
class HostFacts:
    driver: str | None = None
    driver_source: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    topology: str | None = None  # raw `nvidia-smi topo -m`
    nvlink_status: str | None = None  # raw `nvidia-smi nvlink --status`
    errors: list[str] = field(default_factory=list)
    mem_total_kib: int | None = None
    swap_total_kib: int | None = None
    cpus: int = 1


def parse_gpu_query(text: str) -> list[Gpu]:
    """Rows of `nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits`."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not parts[0].isdigit():
            continue
        mem = int(parts[4]) if parts[4].isdigit() else None
        gpus.append(Gpu(int(parts[0]), parts[1], parts[2], parts[3], mem, parts[5]))
    return gpus


def parse_proc_driver_version(text: str) -> str | None:
    """`NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  ...` -> 580.95.05."""
    m = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def parse_topology(text: str) -> dict:
    """GPU-to-GPU links from `nvidia-smi topo -m`: NV# cells are NVLink, PIX/PXB/PHB/NODE/SYS are PCIe paths."""
    # nvidia-smi underlines the header with ANSI escapes even into a pipe ("\t\x1b[4mGPU0\t..."); the header is the
    # indented line, each GPU's row starts at the margin.
    lines = [ln for ln in re.sub(r"\x1b\[[\d;]*m", "", text).splitlines() if ln.strip()]
    header = next((ln for ln in lines if ln[0].isspace() and re.search(r"\bGPU0\b", ln)), None)
    if header is None:
        return {"gpus": 0, "links": {}}
    cols = [c for c in header.split() if re.fullmatch(r"GPU\d+", c)]
    links: Counter[str] = Counter()
    for row, *cells in (ln.split() for ln in lines if not ln[0].isspace()):
        if re.fullmatch(r"GPU\d+", row):
            links.update("NVLink" if re.fullmatch(r"NV\d+", cell) else cell
                         for col, cell in zip(cols, cells) if col != row and cell != "X")
    return {"gpus": len(cols), "links": dict(links)}


def parse_nvlink_status(text: str) -> int:
    """Active NVLink links in `nvidia-smi nvlink --status` ("Link 0: 26.562 GB/s"; inactive ones say so)."""
    return sum(
        1 for ln in text.splitlines() if re.match(r"\s*Link \d+:\s*[\d.]+\s*GB/s", ln) and "inactive" not in ln.lower()
    )


def gather() -> HostFacts:
    facts = HostFacts(cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    try:
        mem = {key: int(kib) for key, kib in re.findall(r"^(\w+):\s+(\d+)", Path("/proc/meminfo").read_text(), re.M)}
        facts.mem_total_kib, facts.swap_total_kib = mem.get("MemTotal"), mem.get("SwapTotal")
    except OSError as exc:
        facts.errors.append(f"/proc/meminfo: {exc}")
    smi = shutil.which("nvidia-smi")
    if smi:
        # 127: nvidia-smi could not start; 124: it hung past the timeout (proc.probe).
        rc, out = proc.probe([smi, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"], timeout=30,
                             stdout_only=True)
        if rc == 0:
            facts.gpus = parse_gpu_query(out)
            if facts.gpus:
                facts.driver, facts.driver_source = facts.gpus[0].driver, "nvidia-smi"
        else:
            facts.errors.append(f"nvidia-smi failed ({rc}): {out[:300]}")
        rc, out = proc.probe([smi, "topo", "-m"], timeout=30, stdout_only=True)
        facts.topology = out if rc == 0 else None
        rc, out = proc.probe([smi, "nvlink", "--status"], timeout=30, stdout_only=True)
        facts.nvlink_status = out if rc == 0 else None
    if facts.driver is None:
        try:
            v = parse_proc_driver_version(Path("/proc/driver/nvidia/version").read_text())
            if v:
                facts.driver, facts.driver_source = v, "/proc/driver/nvidia/version"
        except OSError:
            pass
    return facts


def checks(facts: HostFacts, *, target_cc: str = TARGET_CC) -> list[Check]:
    major = re.match(r"\d+", facts.driver or "")
    if facts.driver is None:
        why = "; ".join(facts.errors) or "nvidia-smi is not on PATH and /proc/driver/nvidia/version is absent"
        driver = Check("host", "NVIDIA driver", WARN, "none",
                       f"no NVIDIA driver on this host ({why}); GPU checks skipped",
                       f"fine on a build host; on the serving host install driver >= {MIN_DRIVER_MAJOR} (CUDA 13)")
    elif major and int(major.group()) >= MIN_DRIVER_MAJOR:
        driver = Check("host", "NVIDIA driver", OK, facts.driver, f"CUDA 13 needs >= {MIN_DRIVER_MAJOR}")
    else:
        driver = Check("host", "NVIDIA driver", FAIL, facts.driver,
                       f"CUDA 13 needs driver >= {MIN_DRIVER_MAJOR}; this one cannot run the cu130 torch",
                       f"install NVIDIA driver >= {MIN_DRIVER_MAJOR} (the reference deployment used 590.48.01)")
    gpus = _gpu_checks(facts, target_cc) if facts.driver is not None or facts.gpus else []
    return [driver, *gpus, *build_memory_checks(facts)]


def _gpu_checks(facts: HostFacts, target_cc: str) -> list[Check]:
    if not facts.gpus:
        return [Check("host", "GPUs", FAIL, "0", "the driver is loaded but nvidia-smi lists no GPU",
                      "check `nvidia-smi`, the device permissions and CUDA_VISIBLE_DEVICES")]
    out = []
    ccs = sorted({g.compute_cap for g in facts.gpus})
    value = f"{len(facts.gpus)} x {', '.join(sorted({g.name for g in facts.gpus}))}"
    if len(facts.gpus) >= TARGET_GPUS:
        out.append(Check("host", "GPUs", OK, value, f"--tp {TARGET_GPUS} needs {TARGET_GPUS} GPUs"))
    else:
        out.append(Check("host", "GPUs", WARN, value,
                         f"the target serves with --tp {TARGET_GPUS}; this host has {len(facts.gpus)} GPU(s)",
                         f"serve with --tp {len(facts.gpus)} here, or use the {TARGET_GPUS}-GPU host"))
    if ccs == [target_cc]:
        out.append(Check("host", "compute capability", OK, target_cc, "SM120: the architecture the stack builds for"))
    else:
        out.append(Check("host", "compute capability", WARN, ", ".join(ccs),
                         f"the stack targets compute capability {target_cc} (RTX PRO 6000 Blackwell); an SM120-only "
                         "sgl-kernel build has no code for this GPU",
                         f"build sgl-kernel for sm_{''.join(ccs[0].split('.'))} too, or run on SM120 GPUs"))
    out.append(interconnect_check(facts))
    return out


def interconnect_check(facts: HostFacts) -> Check:
    if len(facts.gpus) < 2:
        active_links = parse_nvlink_status(facts.nvlink_status or "")
        detail = f"{active_links} active NVLink link(s) on the GPU" if active_links else "no active NVLink link"
        return Check("host", "interconnect", OK, "single GPU",
                     f"one visible GPU, so no all-reduce between GPUs ({detail})")
    links = parse_topology(facts.topology or "")["links"]
    if links.get("NVLink"):
        if any(kind != "NVLink" for kind in links):
            return Check("host", "interconnect", WARN, "NVLink between some GPUs",
                         "some GPU pairs talk over PCIe: custom all-reduce needs every pair on NVLink/P2P",
                         "keep --disable-custom-all-reduce")
        return Check("host", "interconnect", OK, "NVLink", "every GPU pair has NVLink: custom all-reduce can work")
    if links:
        kinds = "/".join(sorted(links))
        return Check("host", "interconnect", OK, f"PCIe only ({kinds})",
                     "no NVLink: custom all-reduce must stay off (sglang #4814, #25649)",
                     "keep --disable-custom-all-reduce (the Qwen3.5 profile sets it)")
    return Check("host", "interconnect", WARN, "unknown", "`nvidia-smi topo -m` gave no GPU matrix",
                 "run `nvidia-smi topo -m` and keep --disable-custom-all-reduce unless every pair shows NV#")


def build_memory_checks(facts: HostFacts) -> list[Check]:
    """How many sgl-kernel compile jobs fit, by the kernel area's measured rule (kernel/jobs.py, recipe.json)."""
    name = "memory for a kernel build"
    swap_gib = (facts.swap_total_kib or 0) / (1 << 20)
    try:
        # The recipe's own loader validates it: the same data `kernel build` and `plan kernel` accept or reject.
        rule = jobs.rule_from_recipe(kernel_recipe.load())
    except StackError as exc:
        return [Check("build", name, FAIL, "unknown", f"cannot read the build memory rule: {exc.message}",
                      exc.hint or "restore pkgs/sgl-kernel/recipe.json from the repository")]
    try:
        build_host = jobs.read_host()
    except (OSError, ValueError) as exc:
        return [Check("build", name, WARN, "unknown", f"cannot read this host's memory: {exc}",
                      "`blackwell-stack kernel build` plans the jobs itself")]
    avail_gib = build_host.available_mib / 1024
    value = f"{avail_gib:.0f} GiB available, {swap_gib:.0f} GiB swap, {build_host.cores} CPUs"
    per_job = f"{rule.per_thread_peak_mib / 1024:.1f} GiB per nvcc job (measured, pkgs/sgl-kernel/recipe.json)"
    try:
        p = jobs.plan(cores=build_host.cores, available_mib=build_host.available_mib, rule=rule)
    except jobs.DoesNotFit as exc:
        return [Check("build", name, FAIL, value, exc.message, exc.hint)]
    swap_note = "; no swap, so an overcommitted build is OOM-killed" if swap_gib == 0 else ""
    if p.jobs < build_host.cores:
        return [Check("build", name, WARN, value,
                      f"{p.jobs} of {build_host.cores} cores can compile at once: {per_job}{swap_note}",
                      f"MAX_JOBS={p.jobs} (`blackwell-stack kernel build` caps it by itself)")]
    return [Check("build", name, OK, value, f"all {build_host.cores} cores can compile at once: {per_job}")]
