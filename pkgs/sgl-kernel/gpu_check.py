"""GPU check of the built sgl-kernel's NVFP4 GEMM, for SM100/SM120 builds.

Run by passthru.gpuCheck on a builder with a GPU, and by `blackwell-stack
kernel test` on SM100/SM120 hosts. Imports sgl_kernel (which loads common_ops
and, with patch 0005, refuses a GPU the build has no kernels for), then runs
one small NVFP4 GEMM and compares it with the same product in float32. On a
GPU older than SM100 there is no NVFP4 GEMM to check (sgl-kernel's FP4
kernels need compute capability 10.0 or newer): it says so and exits 0;
`blackwell-stack kernel test` runs upstream's tests there.
"""

import sys

import torch

FLOAT4_E2M1_MAX = 6.0
FLOAT8_E4M3_MAX = torch.finfo(torch.float8_e4m3fn).max
# NVFP4 keeps ~2 significant bits per element; a 256-long dot product of
# random data still points the same way as the exact one.
MIN_COSINE_SIMILARITY = 0.95


def global_scale(x: torch.Tensor) -> torch.Tensor:
    return (FLOAT8_E4M3_MAX * FLOAT4_E2M1_MAX) / x.abs().amax().to(torch.float32)


# scaled_fp4_quant and cutlass_scaled_fp4_mm run on compute capability 10.0 and newer ("fp4_quant is only
# supported on sm100+", sgl-kernel csrc/gemm/nvfp4_quant_kernels.cu at v0.5.9).
NVFP4_MIN_MAJOR = 10


def main() -> int:
    if not torch.cuda.is_available():
        print("FAIL: no CUDA GPU is visible to torch; run this on the GPU host", file=sys.stderr)
        return 1
    major, minor = torch.cuda.get_device_capability()
    name = torch.cuda.get_device_name()
    if major < NVFP4_MIN_MAJOR:
        print(f"gpu_check.py checks the NVFP4 GEMM of SM100/SM120 builds; this GPU, {name}, has compute capability "
              f"{major}.{minor}, which has no NVFP4 kernels: nothing to check here. "
              "`blackwell-stack kernel test` runs upstream's kernel tests on it.")
        return 0

    import sgl_kernel
    from sgl_kernel import cutlass_scaled_fp4_mm, scaled_fp4_quant

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
