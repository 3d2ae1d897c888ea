"""The Host checks (doctor) section of `blackwell-stack plan`: what `doctor` checks on the target host."""

from __future__ import annotations

from blackwell_stack.data.plan import GPU_HOST, PlanItem, PlanSection, not_checked_here
from blackwell_stack.data.stack import Stack
from blackwell_stack.doctor import envcheck, host
from blackwell_stack.errors import StackError
from blackwell_stack.kernel.inputs import recipe as kernel_recipe

DOCS = "docs/reference-deployment.md"
ON_THE_HOST = not_checked_here("`doctor` on the GPU host")


def plan_sections(stacks: list[Stack]) -> list[PlanSection]:
    """What doctor checks for each stack: key `doctor` for one stack, `doctor-<name>` for several."""
    return [plan_section(stack, key="doctor" if len(stacks) == 1 else f"doctor-{stack.name}") for stack in stacks]


def _kernel_items(stack: Stack, torch_pin: str) -> list[PlanItem]:
    """The kernel the stack runs: built from source here, or a wheel its lock names."""
    kernel = stack.kernel
    if kernel["from"] == "source":
        abi_note = f"the PyPI sgl-kernel 0.3.21 fails this on torch >= 2.10 ({DOCS}#kernel-abi)"
        where = "sgl_kernel/sm100/common_ops"
    else:
        abi_note = f"{kernel['package']} from {stack.relpath}/uv.lock; `stack audit` checked its symbols against this torch"
        where = "sgl_kernel's common_ops libraries"
    return [
        PlanItem(f"{kernel['package']} ABI", f"every torch symbol of {kernel['package']} resolves in torch {torch_pin}; "
                 f"both link CUDA runtime {envcheck.TARGET_CUDA_MAJOR}",
                 source=f"doctor abi (dynamic symbol tables); {abi_note}", checked_by=ON_THE_HOST, needs=GPU_HOST),
        PlanItem(f"{kernel['package']} architectures", f"{where} carries sm_120a cubins",
                 source=f"inspect (fatbin headers, checked against cuobjdump); {DOCS}#target-architectures",
                 checked_by=ON_THE_HOST, needs=GPU_HOST),
    ]


def plan_section(stack: Stack, *, key: str = "doctor") -> PlanSection:
    """What doctor checks for `stack`."""
    s = PlanSection(key=key, title=f"Host checks (doctor) for stack {stack.name}")
    try:
        runtime = stack.versions()
    except StackError as exc:  # a stack without a lock: nothing to check a host against yet
        s.items.append(PlanItem("versions", "unknown", verified=False, note=str(exc)))
        return s
    torch_pin = runtime["torch"]
    lock = f"{stack.relpath}/uv.lock"
    cubin = stack.lock().get("flashinfer-cubin")
    job_peak_mib = kernel_recipe.load()["memory"]["per_nvcc_thread_peak_mib"]
    s.items = [
        PlanItem("NVIDIA driver", f">= {host.MIN_DRIVER_MAJOR} (CUDA 13); reference host 590.48.01",
                 source=f"CUDA 13.0 release notes; {DOCS}#target", checked_by=ON_THE_HOST, needs=GPU_HOST),
        PlanItem("GPUs", f"{host.TARGET_GPUS} x NVIDIA RTX PRO 6000 Blackwell Server Edition (--tp {host.TARGET_GPUS})",
                 source=f"{DOCS}#target", checked_by=ON_THE_HOST, needs=GPU_HOST),
        PlanItem("compute capability", f"{host.TARGET_CC} on every GPU (sm_120a code)", source=f"{DOCS}#target",
                 checked_by=ON_THE_HOST, needs=GPU_HOST),
        PlanItem("interconnect", "PCIe only: --disable-custom-all-reduce stays on",
                 source=f"nvidia-smi topo -m; sglang #4814, #25649 ({DOCS}#custom-all-reduce)",
                 checked_by=ON_THE_HOST, needs=GPU_HOST),
        PlanItem("torch", f"{torch_pin} (CUDA {envcheck.TARGET_CUDA_MAJOR})", source=lock,
                 checked_by=ON_THE_HOST, needs=GPU_HOST),
        *_kernel_items(stack, torch_pin),
        PlanItem("flashinfer", (f"flashinfer-python == flashinfer-cubin == {runtime['flashinfer']}" if cubin
                                else f"flashinfer-python {runtime['flashinfer']} (no flashinfer-cubin in this stack)"),
                 source=f"{lock}; flashinfer PR #2716 ({DOCS}#fp4-gemm-backend)",
                 checked_by=ON_THE_HOST, needs=GPU_HOST),
        PlanItem("sglang", f"{runtime['sglang']}", source=f"{lock}; {DOCS}#what-sglang-requires",
                 checked_by=ON_THE_HOST, needs=GPU_HOST),
    ]
    if stack.kernel["from"] == "source":
        s.items.append(PlanItem(
            "memory for a kernel build",
            f"one nvcc job per {job_peak_mib} MiB available (swap not counted); MAX_JOBS capped to what fits",
            source=f"pkgs/sgl-kernel/recipe.json memory (measured); kernel/jobs.py; {DOCS}#build-memory",
            checked_by="measured on a GPU machine (benchmarks/kernel-compile-memory/)"))
    s.commands = [
        f"blackwell-stack stack doctor {stack.name} --python /path/to/venv/bin/python",
        "blackwell-stack doctor abi --kernel env --torch env",
    ]
    if stack.kernel["from"] == "source":
        s.commands += [
            "blackwell-stack inspect sgl_kernel-0.3.21-*.whl",
            "blackwell-stack wheel diff build-a.whl build-b.whl",
        ]
    return s
