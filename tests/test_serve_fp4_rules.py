"""The SM120 FP4 GEMM rules hold only where an FP4 GEMM runs.

SGLang uses --fp4-gemm-backend for NVFP4 weights only: an FP4 quantization on the command line, or the
profile's own NVFP4 checkpoint, whose quantization SGLang reads from it. A BF16 model served with the
profile's flags less the FP4 ones (the GPU run of benchmarks/sglang-gpu/) must not be refused for a
backend it never uses.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

FP4_RULES = {"sm120-fp4-gemm-cutlass-before-flashinfer-fix", "sm120-fp4-gemm-flashinfer-trtllm"}


def fired(*settings: str) -> set[str]:
    argv = [sys.executable, "-m", "blackwell_stack", "serve", "check", "--stack", "stable", "--json"]
    for setting in settings:
        argv += ["--set", setting]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
    verdicts = json.loads(result.stdout)["verdicts"]
    return {v["id"] for v in verdicts if v["fired"]} & FP4_RULES


@pytest.mark.parametrize("settings,expected", [
    # The BF16 model of the GPU run: no FP4 quantization, a local checkpoint, the backend left to its default.
    (("quantization=null", "fp4-gemm-backend=null", "model-path=/models/llama-bf16"), set()),
    (("quantization=null", "fp4-gemm-backend=flashinfer_trtllm", "model-path=/models/llama-bf16"), set()),
    # The NVFP4 checkpoint with the backend that gives NaN: refused, with or without --quantization.
    (("fp4-gemm-backend=null",), {"sm120-fp4-gemm-cutlass-before-flashinfer-fix"}),
    (("quantization=null", "fp4-gemm-backend=null"), {"sm120-fp4-gemm-cutlass-before-flashinfer-fix"}),
    (("fp4-gemm-backend=flashinfer_trtllm",), {"sm120-fp4-gemm-flashinfer-trtllm"}),
    (("quantization=modelopt_fp4", "fp4-gemm-backend=null", "model-path=/models/other-nvfp4"),
     {"sm120-fp4-gemm-cutlass-before-flashinfer-fix"}),
], ids=["bf16", "bf16-trtllm", "nvfp4", "nvfp4-auto", "nvfp4-trtllm", "other-nvfp4"])
def test_fp4_rules_follow_the_fp4_in_use(settings, expected):
    assert fired(*settings) == expected
