"""Write pkgs/sgl-kernel/reference-wheel.json.

    python3 benchmarks/kernel-reproducibility/make_reference.py [--check]

No reference is current: the wheel measured here (results/run2, and the same bytes from
results/rebuild-other-host) was built with a compiler that has only a static libstdc++, so every
library of it carries its own C++ runtime, which crashed SGLang at start-up. `kernel build` now
refuses such a compiler and such a wheel, stages its inputs at one fixed path, and names its
compilers in the record, so the next reference is measured afresh (`to_record`).

--check: exit 1 unless the file in the repository is what this writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from blackwell_stack.fileio import atomic_write_bytes
from blackwell_stack.kernel import reference
from blackwell_stack.model import registry

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / registry.entry("reference-wheel").pattern

# results/rebuild-other-host/summary.md: the wheel of run 2, rebuilt bit for bit on a second machine.
WITHDRAWN_WHEEL = {"name": "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl",
                   "sha256": "51b2e6732e1bcd1521853eb4607c23c26c426a5395f13fdda6decbced2440249", "size": 16177391}


def build() -> dict:
    return {
        "schema_version": reference.SCHEMA_VERSION,
        "description": (
            "The reference sgl-kernel wheel: one configuration of `blackwell-stack kernel build` and the wheel it "
            "gave, bit for bit (`current`, or null while none is measured for the repository's recipe), and the "
            "references withdrawn before it. `kernel build` compares its configuration with the current one and, "
            "when they are the same, its wheel with that wheel; `wheel diff --reference WHEEL` compares any wheel; "
            "`kernel reference` shows this file. Written by benchmarks/kernel-reproducibility/make_reference.py."
        ),
        "current": None,
        "current_reason": (
            "the last reference was withdrawn, and no build of the current recipe, stage and compiler "
            "checks has been measured twice yet"
        ),
        "withdrawn": [{
            "wheel": WITHDRAWN_WHEEL,
            "cuda_archs": "12.0a",
            "measured": "benchmarks/kernel-reproducibility/results/run2 and results/rebuild-other-host, 2026-11-30: "
            "the same bytes on two machines",
            "why": "built with a GCC 13.3 that has only a static libstdc++ (the device machine's /opt/gcc, which "
            "its environment names as CXX and CUDAHOSTCXX): every library carries its own C++ runtime and none "
            "needs libstdc++.so.6 (results/run2/needed.tsv), the defect that crashed SGLang at start-up in "
            "`import deep_gemm` (benchmarks/sglang-gpu/). `kernel build` now refuses such a compiler and such a "
            "wheel (docs/sgl-kernel.md)",
        }],
        "to_record": (
            "build --arch 12.0a with `blackwell-stack kernel build` in the fixed stage and with the distribution's "
            "compilers on two machines (benchmarks/sglang-gpu/device.sh with SGLANG_GPU_REFERENCE=1 makes one), "
            "check that the two wheels are the same (`wheel diff A B`), then record the plan's `build_info` and "
            "`conditions` (`kernel build --json`) and the wheel's members as `current` here "
            "(benchmarks/kernel-reproducibility/README.md)"
        ),
    }


def main(argv: list[str]) -> int:
    text = (json.dumps(build(), indent=2, sort_keys=False) + "\n").encode()
    if "--check" in argv:
        current = OUT.read_bytes() if OUT.is_file() else b""
        if current != text:
            print(f"{OUT} is not what {Path(__file__).name} writes", file=sys.stderr)
            return 1
        return 0
    atomic_write_bytes(OUT, text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
