"""The Host checks (doctor) section of `blackwell-stack plan`: what `doctor` checks on the target host."""

from __future__ import annotations

from blackwell_stack.doctor import envcheck, host
from blackwell_stack.kernel import recipe as kernel_recipe
from blackwell_stack.stacks import model as stacks_model
from blackwell_stack.plan_model import PlanItem, PlanSection


def _pinned_versions() -> dict[str, str]:
    """sglang, flashinfer and torch as the default stack's lock has them."""
    return stacks_model.load(stacks_model.default_name()).versions()


def plan_section() -> PlanSection:
    torch_pin = envcheck.pinned_torch()
    runtime = _pinned_versions()
    job_peak_mib = kernel_recipe.load()["memory"]["per_nvcc_thread_peak_mib"]
    s = PlanSection(key="doctor", title="Host checks (doctor)")
    s.items = [
        PlanItem("NVIDIA driver", f">= {host.MIN_DRIVER_MAJOR} (CUDA 13); reference host 590.48.01",
                 source="CUDA 13.0 minimum driver; docs/reference-deployment.md"),
        PlanItem("GPUs", f"{host.TARGET_GPUS} x NVIDIA RTX PRO 6000 Blackwell Server Edition (--tp {host.TARGET_GPUS})",
                 source="docs/reference-deployment.md"),
        PlanItem("compute capability", f"{host.TARGET_CC} on every GPU (sm_120a code)", source="docs/reference-deployment.md"),
        PlanItem("interconnect", "PCIe only: --disable-custom-all-reduce stays on",
                 source="nvidia-smi topo -m; sglang #4814, #25649"),
        PlanItem("torch", f"{torch_pin} (CUDA {envcheck.TARGET_CUDA_MAJOR})", source="the default stack's uv.lock"),
        PlanItem("sgl-kernel ABI", f"every torch symbol of sgl-kernel resolves in torch {torch_pin}; "
                 f"both link CUDA runtime {envcheck.TARGET_CUDA_MAJOR}",
                 source="doctor abi (dynamic symbol tables); the PyPI sgl-kernel 0.3.21 fails this on torch >= 2.10"),
        PlanItem("sgl-kernel architectures", "sgl_kernel/sm100/common_ops carries sm_120a cubins",
                 source="inspect (fatbin headers, checked against cuobjdump)"),
        PlanItem("flashinfer", f"flashinfer-python == flashinfer-cubin == {runtime['flashinfer']}",
                 source="the default stack's uv.lock; flashinfer PR #2716"),
        PlanItem("sglang", f"{runtime['sglang']} (its torch/flashinfer pins overridden by the stack's pyproject.toml)",
                 source="the default stack's uv.lock"),
        PlanItem("memory for a kernel build",
                 f"one nvcc job per {job_peak_mib} MiB available (swap not counted); MAX_JOBS capped to what fits",
                 source="pkgs/sgl-kernel/recipe.json memory (measured); kernel/jobs.py"),
    ]
    s.commands = [
        "blackwell-stack doctor --python /path/to/venv/bin/python",
        "blackwell-stack doctor abi --kernel env --torch env",
        "blackwell-stack inspect sgl_kernel-0.3.21-*.whl",
        "blackwell-stack wheel diff build-a.whl build-b.whl",
    ]
    return s
