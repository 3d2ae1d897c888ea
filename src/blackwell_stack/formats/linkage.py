"""What a library's dynamic linkage says: CUDA runtime major, torch libraries and torch symbols."""

from __future__ import annotations

import re

# The shared libraries of a torch install (torch/lib); the CUDA ones decide a CUDA build.
TORCH_LIBRARIES = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so",
                   "libtorch_python.so", "libtorch_cuda_linalg.so", "libtorch_nvshmem.so", "libshm.so",
                   "libtorch_global_deps.so", "libcaffe2_nvrtc.so")
TORCH_CUDA_LIBRARIES = ("libc10_cuda.so", "libtorch_cuda.so")

# CUDA libraries whose soname major equals the CUDA major (libcufft etc. do not).
_CUDA_RUNTIME = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink)\.so\.(\d+)$")

# Mangled names in torch's namespaces (c10, at, torch, caffe2), vtables and typeinfo included.
_TORCH_SYMBOL = re.compile(r"^_Z(?:T[VIST])?N?[KVrLOR]*(?:3c10|2at|5torch|6caffe2)")


def cuda_runtime_major(needed: list[str]) -> int | None:
    """12 or 13 from DT_NEEDED entries like libcudart.so.12; None when no CUDA runtime is linked."""
    majors = {int(m.group(1)) for n in needed if (m := _CUDA_RUNTIME.match(n))}
    return max(majors) if majors else None


def torch_libraries(needed: list[str]) -> list[str]:
    return [n for n in needed if n in TORCH_LIBRARIES]


def is_torch_symbol(name: str) -> bool:
    return bool(_TORCH_SYMBOL.match(name)) or name.startswith("THP")
