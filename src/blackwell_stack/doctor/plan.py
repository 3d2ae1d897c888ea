"""The Host checks (doctor) section of `blackwell-stack plan`: what `doctor` checks on the target host."""

from __future__ import annotations

from blackwell_stack.doctor import envcheck, host
from blackwell_stack.kernel import recipe as kernel_recipe
from blackwell_stack.plan_model import PlanItem, PlanSection, not_checked_here
from blackwell_stack.stacks import model as stacks_model


def _pinned_versions() -> dict[str, str]:
    """sglang, flashinfer and torch as the default stack's lock has them."""
    return stacks_model.load(stacks_model.default_name()).versions()


DOCS = "docs/reference-deployment.md"
ON_THE_HOST = not_checked_here("`doctor` on the GPU host")


def plan_section() -> PlanSection:
    torch_pin = envcheck.pinned_torch()
    runtime = _pinned_versions()
    job_peak_mib = kernel_recipe.load()["memory"]["per_nvcc_thread_peak_mib"]
    s = PlanSection(key="doctor", title="Host checks (doctor)")
    s.items = [
        PlanItem("NVIDIA driver", f">= {host.MIN_DRIVER_MAJOR} (CUDA 13); reference host 590.48.01",
                 source=f"CUDA 13.0 release notes; {DOCS}#target", checked_by=ON_THE_HOST),
        PlanItem("GPUs", f"{host.TARGET_GPUS} x NVIDIA RTX PRO 6000 Blackwell Server Edition (--tp {host.TARGET_GPUS})",
                 source=f"{DOCS}#target", checked_by=ON_THE_HOST),
        PlanItem("compute capability", f"{host.TARGET_CC} on every GPU (sm_120a code)", source=f"{DOCS}#target",
                 checked_by=ON_THE_HOST),
        PlanItem("interconnect", "PCIe only: --disable-custom-all-reduce stays on",
                 source=f"nvidia-smi topo -m; sglang #4814, #25649 ({DOCS}#custom-all-reduce)", checked_by=ON_THE_HOST),
        PlanItem("torch", f"{torch_pin} (CUDA {envcheck.TARGET_CUDA_MAJOR})", source="the default stack's uv.lock",
                 checked_by=ON_THE_HOST),
        PlanItem("sgl-kernel ABI", f"every torch symbol of sgl-kernel resolves in torch {torch_pin}; "
                 f"both link CUDA runtime {envcheck.TARGET_CUDA_MAJOR}",
                 source=f"doctor abi (dynamic symbol tables); the PyPI sgl-kernel 0.3.21 fails this on torch >= 2.10 "
                 f"({DOCS}#kernel-abi)", checked_by=ON_THE_HOST),
        PlanItem("sgl-kernel architectures", "sgl_kernel/sm100/common_ops carries sm_120a cubins",
                 source=f"inspect (fatbin headers, checked against cuobjdump); {DOCS}#target-architectures",
                 checked_by=ON_THE_HOST),
        PlanItem("flashinfer", f"flashinfer-python == flashinfer-cubin == {runtime['flashinfer']}",
                 source=f"the default stack's uv.lock; flashinfer PR #2716 ({DOCS}#fp4-gemm-backend)", checked_by=ON_THE_HOST),
        PlanItem("sglang", f"{runtime['sglang']} (its torch/flashinfer pins overridden by the stack's pyproject.toml)",
                 source=f"the default stack's uv.lock; {DOCS}#what-sglang-requires", checked_by=ON_THE_HOST),
        PlanItem("memory for a kernel build",
                 f"one nvcc job per {job_peak_mib} MiB available (swap not counted); MAX_JOBS capped to what fits",
                 source=f"pkgs/sgl-kernel/recipe.json memory (measured); kernel/jobs.py; {DOCS}#build-memory",
                 checked_by="measured on a GPU machine (benchmarks/kernel-compile-memory/)"),
    ]
    s.commands = [
        "blackwell-stack doctor --python /path/to/venv/bin/python",
        "blackwell-stack doctor abi --kernel env --torch env",
        "blackwell-stack inspect sgl_kernel-0.3.21-*.whl",
        "blackwell-stack wheel diff build-a.whl build-b.whl",
    ]
    return s
