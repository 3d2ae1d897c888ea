"""The Host checks (doctor) section of `blackwell-stack plan`: what `doctor` checks on the target host."""

from __future__ import annotations

from blackwell_stack.data.plan import GPU_HOST, PlanItem, PlanSection, not_checked_here
from blackwell_stack.data.stack import Stack
from blackwell_stack.doctor import envcheck, host
from blackwell_stack.errors import StackError
from blackwell_stack.kernel.inputs import recipe as kernel_recipe

DOCS = "docs/reference-deployment.md"
ON_THE_HOST = not_checked_here("`doctor` on the GPU host")


def plan_section(stack: Stack, key: str) -> PlanSection:
    s = PlanSection(key=key, title=f"Host checks (doctor) for stack {stack.name}")
    try:
        runtime = stack.versions()
    except StackError as exc:  # a stack without a lock: nothing to check a host against yet
        s.items.append(PlanItem("versions", "unknown", verified=False, note=str(exc)))
        return s
    torch_pin, lock, kernel = runtime["torch"], f"{stack.relpath}/uv.lock", stack.kernel
    from_source = kernel["from"] == "source"
    # The kernel the stack runs: built from source here, or a wheel its lock names.
    if from_source:
        abi_note = f"the PyPI sgl-kernel 0.3.21 fails this on torch >= 2.10 ({DOCS}#kernel-abi)"
        where = "sgl_kernel/sm100/common_ops"
    else:
        abi_note = f"{kernel['package']} from {lock}; `stack audit` checked its symbols against this torch"
        where = "sgl_kernel's common_ops libraries"
    flashinfer = (f"flashinfer-python == flashinfer-cubin == {runtime['flashinfer']}"
                  if stack.lock().get("flashinfer-cubin")
                  else f"flashinfer-python {runtime['flashinfer']} (no flashinfer-cubin in this stack)")
    on_the_host = [  # (item, value, source)
        ("NVIDIA driver", f">= {host.MIN_DRIVER_MAJOR} (CUDA 13); reference host 590.48.01",
         f"CUDA 13.0 release notes; {DOCS}#target"),
        ("GPUs", f"{host.TARGET_GPUS} x NVIDIA RTX PRO 6000 Blackwell Server Edition (--tp {host.TARGET_GPUS})",
         f"{DOCS}#target"),
        ("compute capability", f"{host.TARGET_CC} on every GPU (sm_120a code)", f"{DOCS}#target"),
        ("interconnect", "PCIe only: --disable-custom-all-reduce stays on",
         f"nvidia-smi topo -m; sglang #4814, #25649 ({DOCS}#custom-all-reduce)"),
        ("torch", f"{torch_pin} (CUDA {envcheck.TARGET_CUDA_MAJOR})", lock),
        (f"{kernel['package']} ABI", f"every torch symbol of {kernel['package']} resolves in torch {torch_pin}; "
         f"both link CUDA runtime {envcheck.TARGET_CUDA_MAJOR}", f"doctor abi (dynamic symbol tables); {abi_note}"),
        (f"{kernel['package']} architectures", f"{where} carries sm_120a cubins",
         f"inspect (fatbin headers, checked against cuobjdump); {DOCS}#target-architectures"),
        ("flashinfer", flashinfer, f"{lock}; flashinfer PR #2716 ({DOCS}#fp4-gemm-backend)"),
        ("sglang", runtime["sglang"], f"{lock}; {DOCS}#what-sglang-requires"),
    ]
    s.items = [PlanItem(name, value, source=source, checked_by=ON_THE_HOST, needs=GPU_HOST)
               for name, value, source in on_the_host]
    s.commands = [
        f"blackwell-stack stack doctor {stack.name} --python /path/to/venv/bin/python",
        "blackwell-stack doctor abi --kernel env --torch env",
    ]
    if from_source:
        job_peak_mib = kernel_recipe.load()["memory"]["per_nvcc_thread_peak_mib"]
        s.items.append(PlanItem(
            "memory for a kernel build",
            f"one nvcc job per {job_peak_mib} MiB available (swap not counted); MAX_JOBS capped to what fits",
            source=f"pkgs/sgl-kernel/recipe.json memory (measured); kernel/jobs.py; {DOCS}#build-memory",
            checked_by="measured on a GPU machine (benchmarks/kernel-compile-memory/)"))
        s.commands += ["blackwell-stack inspect sgl_kernel-0.3.21-*.whl",
                       "blackwell-stack wheel diff build-a.whl build-b.whl"]
    return s
