"""The first case of upstream's test_merge_state_v2.py, one kernel call at a time, to see which one crashes.

upstream's test times the torch, Triton, merge_state (v1) and merge_state_v2
versions of the same merge and expects an unsupported head size to raise an
exception it catches (`except Exception` in perf_kernel_fn). Each call here is
announced before it is made (flushed), so a process killed by a signal shows
the last call it began; run it with `python -X faulthandler` for the Python
stack, or under cuda-gdb for the native one.

    python merge_state_probe.py --head-size 32
"""

import argparse
import sys

import torch


def say(text: str) -> None:
    print(text, flush=True)


def reference(v_a, s_a, v_b, s_b):
    """The merge in float32 with torch (what the test's torch version computes)."""
    s_a, s_b = s_a.clone(), s_b.clone()
    s_a[s_a == float("inf")] = float("-inf")
    s_b[s_b == float("inf")] = float("-inf")
    top = torch.maximum(s_a, s_b)
    w_a, w_b = torch.exp(s_a - top), torch.exp(s_b - top)
    total = w_a + w_b
    out = (v_a.float() * (w_a / total)[..., None] + v_b.float() * (w_b / total)[..., None])
    return out, torch.log(total) + top


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--head-size", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    args = parser.parse_args()

    import sgl_kernel
    from sgl_kernel import merge_state, merge_state_v2

    archs = getattr(getattr(sgl_kernel, "_build_archs", None), "CUDA_ARCHS", None)
    say(f"sgl_kernel {sgl_kernel.__file__} built for {archs}; torch {torch.__version__}; {torch.cuda.get_device_name()}")
    shape = (args.tokens, args.heads, args.head_size)
    torch.manual_seed(0)
    v_a = torch.randn(shape, dtype=torch.half, device="cuda")
    v_b = torch.randn(shape, dtype=torch.half, device="cuda")
    s_a = torch.randn(shape[:2], dtype=torch.float32, device="cuda")
    s_b = torch.randn(shape[:2], dtype=torch.float32, device="cuda")
    expected, _ = reference(v_a, s_a, v_b, s_b)

    for name, fn in (("merge_state (v1)", merge_state), ("merge_state_v2", merge_state_v2)):
        say(f"calling {name} with head size {args.head_size}")
        try:
            out, _lse = fn(v_a, s_a, v_b, s_b)
            torch.cuda.synchronize()
        except Exception as exc:  # what upstream's test expects for an unsupported head size
            say(f"{name}: raised {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        error = (out.float() - expected).abs().max().item()
        say(f"{name}: returned; largest difference from float32 torch {error:.3g}")
    say("done: no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
