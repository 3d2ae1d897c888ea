"""GPU check of the built sgl-kernel (run by passthru.gpuCheck on a builder with a GPU).

Imports sgl_kernel (which loads common_ops and, with patch 0005, refuses a GPU
the build has no kernels for), then runs one small NVFP4 GEMM and compares it
with the same product in float32.
"""

import sys

import torch

import sgl_kernel
from sgl_kernel import cutlass_scaled_fp4_mm, scaled_fp4_quant

FLOAT4_E2M1_MAX = 6.0
FLOAT8_E4M3_MAX = torch.finfo(torch.float8_e4m3fn).max
# NVFP4 keeps ~2 significant bits per element; a 256-long dot product of
# random data still points the same way as the exact one.
MIN_COSINE_SIMILARITY = 0.95


def global_scale(x: torch.Tensor) -> torch.Tensor:
    return (FLOAT8_E4M3_MAX * FLOAT4_E2M1_MAX) / x.abs().amax().to(torch.float32)


def main() -> int:
    major, minor = torch.cuda.get_device_capability()
    archs = getattr(getattr(sgl_kernel, "_build_archs", None), "CUDA_ARCHS", None)
    print(f"sgl_kernel {sgl_kernel.__file__}: GPU {major}.{minor}, built for {archs or 'upstream list'}")

    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((128, 256), device="cuda", dtype=torch.bfloat16, generator=generator)
    b = torch.randn((256, 256), device="cuda", dtype=torch.bfloat16, generator=generator)
    a_scale, b_scale = global_scale(a), global_scale(b)
    a_fp4, a_block_scale = scaled_fp4_quant(a, a_scale)
    b_fp4, b_block_scale = scaled_fp4_quant(b, b_scale)
    alpha = 1.0 / (a_scale * b_scale)
    out = cutlass_scaled_fp4_mm(a_fp4, b_fp4, a_block_scale, b_block_scale, alpha, torch.bfloat16)
    torch.cuda.synchronize()

    reference = a.float() @ b.float().T
    if not torch.isfinite(out).all():
        print("FAIL: NVFP4 GEMM produced NaN or inf", file=sys.stderr)
        return 1
    similarity = torch.nn.functional.cosine_similarity(out.float().flatten(), reference.flatten(), dim=0).item()
    print(f"NVFP4 GEMM 128x256 @ 256x256: cosine similarity to float32 = {similarity:.4f}")
    if similarity < MIN_COSINE_SIMILARITY:
        print(f"FAIL: below {MIN_COSINE_SIMILARITY}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
