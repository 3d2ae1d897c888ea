"""Write pkgs/sgl-kernel/reference-wheel.json from the measured build in results/h200-12.0a-torch-2.12.1/.

    python3 benchmarks/kernel-reproducibility/make_reference.py [--check]

Where each part comes from (all in results/h200-12.0a-torch-2.12.1/, one `kernel build --arch 12.0a --json` on the
GPU machine with the stable lock's torch 2.12.1, the pinned sources and no --allow-source-mismatch, the
distribution's compilers and the fixed stage, benchmarks/sglang-gpu/device.sh with SGLANG_GPU_REFERENCE=only);
while that directory holds no build, the file says that no reference is current, and why:
- the configuration: the build's own JSON (build-12.0a.json): its command, `conditions` and `build_info`, the
  record the wheel carries;
- the result: the wheel's sha256 and size (12.0a-wheel.sha256) and every member's sha256 and size
  (12.0a-members.tsv.gz), as measured there.
The reference withdrawn before it stays listed, with why.

--check: exit 1 unless the file in the repository is what this writes.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import sys
from pathlib import Path

from blackwell_stack.data import registry
from blackwell_stack.fileio import atomic_write_bytes
from blackwell_stack.kernel.reproducibility import reference

HERE = Path(__file__).resolve().parent
MEASURED = HERE / "results" / "h200-12.0a-torch-2.12.1"
OUT = HERE.parents[1] / registry.entry("reference-wheel").pattern

# results/rebuild-other-host/summary.md: the wheel of run 2, rebuilt bit for bit on a second machine.
WITHDRAWN_WHEEL = {"name": "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl",
                   "sha256": "51b2e6732e1bcd1521853eb4607c23c26c426a5395f13fdda6decbced2440249", "size": 16177391}
WHERE = "benchmarks/kernel-reproducibility/results/h200-12.0a-torch-2.12.1"
# results/h200-12.0a-reference/12.0a-wheel.sha256: the reference before it, measured on torch 2.11.
TORCH_2_11_WHEEL = {"name": "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl",
                    "sha256": "a0e6a8d70b3d0c0a142b0d99d52aadfdbd81a81c5d025506586a1809615dc700", "size": 14805216}


def _generic(command: str) -> str:
    """The build's command (build-12.0a-command.txt) with its machine's paths named by role."""
    text = command.strip()
    for option, role in (("--src", "SRC"), ("--sources", "SOURCES"), ("--python", "PYTHON"), ("--out", "OUT")):
        text = re.sub(rf"{option} \S+", f"{option} {role}", text)
    return text


def current() -> dict | None:
    """The measured reference, or None while MEASURED holds no build."""
    if not (MEASURED / "build-12.0a.json").is_file():
        return None
    plan = json.loads((MEASURED / "build-12.0a.json").read_text())
    digest, size = (MEASURED / "12.0a-wheel.sha256").read_text().split("\n")[:2]
    with gzip.open(MEASURED / "12.0a-members.tsv.gz", "rt") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read()), delimiter="\t"))
    members = {r["member"]: r["sha256"] for r in rows if not r["member"].endswith(".dist-info/RECORD")}
    compiled = {r["member"]: {"sha256": r["sha256"], "size": int(r["size"])} for r in rows
                if r["member"].endswith(".so")}
    return {
        "measured": f"{WHERE}: one build on the GPU machine (16 cores, 128 GiB) with the stable lock's torch 2.12.1 "
        "installed into a copy of the machine's venv (the lock's NCCL 2.29.7 wheel beside it, the "
        "machine's other CUDA 13.0 libraries serving its import: torch-venv-wheels.txt), the pinned sources with no "
        "--allow-source-mismatch, 2026-12-03, 761 s (timeline.txt). Its libraries need libstdc++.so.6 and carry no C++ "
        "runtime (12.0a-inspect.json). That the checkout's and the venv's paths do not reach the bytes is shown on "
        "the CPU (tests/test_kernel_stage.py)",
        "configuration": {
            "command": _generic((MEASURED / "build-12.0a-command.txt").read_text()),
            "conditions": plan["conditions"],
            "build_record": plan["build_info"],
        },
        "result": {
            "wheel": {"name": plan["wheel"].rsplit("/", 1)[-1], "sha256": digest.split()[0], "size": int(size)},
            "wheel_source": f"{WHERE}/12.0a-wheel.sha256",
            "compiled": compiled,
            "members_source": f"{WHERE}/12.0a-members.tsv.gz (every member but RECORD, which follows from them)",
            "members": members,
        },
    }


def build() -> dict:
    measured = current()
    doc = {
        "schema_version": reference.SCHEMA_VERSION,
        "description": (
            "The reference sgl-kernel wheel: one configuration of `blackwell-stack kernel build` and the wheel it "
            "gave, bit for bit, and the references withdrawn before it. `kernel build` compares its configuration "
            "with the current one and, when they are the same, its wheel with that wheel; `wheel diff --reference "
            "WHEEL` compares any wheel; `kernel reference` shows this file, and the test suite fails as soon as the "
            "build record no longer describes the repository. Written by "
            "benchmarks/kernel-reproducibility/make_reference.py."
        ),
        "current": measured,
    }
    if measured is None:
        doc["current_reason"] = (
            "none measured since the sources were pinned as the build reads them (filtered trees) and the torch-2.11 "
            "reference was withdrawn")
    doc["withdrawn"] = [{
        "wheel": TORCH_2_11_WHEEL,
        "cuda_archs": "12.0a",
        "measured": "benchmarks/kernel-reproducibility/results/h200-12.0a-reference, 2026-12-02, and rebuilt bit for "
        "bit on a second machine with every path changed",
        "why": "no user could build it: it was compiled against the GPU machine's torch 2.11.0+cu130 (--allow-torch; "
        "the stable lock's is 2.12.1), with three --allow-source-mismatch (CUTLASS without media/, docs/ and test/, "
        "a subset of nlohmann/json, and a placeholder for triton, so its triton_kernels/ held "
        "PLACEHOLDER_NOT_TRITON_v3.5.1.txt instead of the package sgl-kernel installs)",
    }, {
        "wheel": WITHDRAWN_WHEEL,
        "cuda_archs": "12.0a",
        "measured": "benchmarks/kernel-reproducibility/results/run2 and results/rebuild-other-host, 2026-11-30: "
        "the same bytes on two machines",
        "why": "built with a GCC 13.3 that has only a static libstdc++ (the device machine's /opt/gcc, which "
        "its environment names as CXX and CUDAHOSTCXX): every library carries its own C++ runtime and none "
        "needs libstdc++.so.6 (results/run2/needed.tsv), the defect that crashed SGLang at start-up in "
        "`import deep_gemm` (benchmarks/sglang-gpu/). `kernel build` now refuses such a compiler and such a "
        "wheel (docs/sgl-kernel.md)",
    }]
    doc["to_record"] = (
        "build --arch 12.0a with `blackwell-stack kernel build` in the fixed stage, with the distribution's "
        "compilers, the stable lock's torch and the pinned sources (benchmarks/sglang-gpu/device.sh with "
        "SGLANG_GPU_REFERENCE=only and SGLANG_GPU_TORCH_WHEELS), then record the build's `build_info`, "
        "`conditions` and the wheel's members here with this script (benchmarks/kernel-reproducibility/README.md)"
    )
    return doc


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
