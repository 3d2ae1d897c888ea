"""Write pkgs/sgl-kernel/reference-wheel.json from the measured builds in results/.

    python3 benchmarks/kernel-reproducibility/make_reference.py [--check]

Where each part comes from:
- the configuration: run 2's command, environment and build record
  (results/run2/command-a.txt, env.txt, build-info.json), with the build
  record rendered again by the current code for that configuration
  (`kernel.reference.expected_record`); it must differ from run 2's in
  exactly the values results/rebuild-other-host/summary.md names;
- the result: the wheel of results/rebuild-other-host (its sha256 and size as
  measured there), and its members: run 2's (results/run2/members.tsv, the
  908 members that build found unchanged) with the build record's.

--check: exit 1 unless the file in the repository is what this writes.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
from pathlib import Path

from blackwell_stack.fileio import atomic_write_bytes
from blackwell_stack.kernel import buildinfo, reference

HERE = Path(__file__).resolve().parent
RUN2 = HERE / "results" / "run2"
OUT = HERE.parents[1] / Path(*reference.REFERENCE_PARTS)

# results/rebuild-other-host/summary.md
WHEEL = {"name": "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl",
         "sha256": "51b2e6732e1bcd1521853eb4607c23c26c426a5395f13fdda6decbced2440249", "size": 16177391}
# What changed in the record since run 2 (the same file).
CHANGED_SINCE_RUN2 = {"patches[0003-cmake-respect-SGL_KERNEL_ENABLE_FA3-OFF].sha256",
                      "patches[0004-python-flash_attn-fall-back-without-flash_ops].sha256",
                      "patches[0005-cmake-python-target-architectures-from-SGL_KERNEL_CUDA_ARCHS].sha256",
                      "patches[0007-cmake-install-nothing-of-mscclpp].sha256",
                      "patches[0008-cmake-ninja-job-pools-for-memory-heavy-sources].sha256",
                      "patches[0009-cmake-install-the-build-record].sha256",
                      "torch.source"}
ELF_MEMBERS = ("deep_gemm/deep_gemm_cpp.abi3.so", "sgl_kernel/sm100/common_ops.abi3.so", "sgl_kernel/spatial_ops.abi3.so")


def _env_versions(text: str) -> dict[str, str]:
    def find(pattern: str) -> str:
        m = re.search(pattern, text, re.MULTILINE)
        if not m:
            raise SystemExit(f"env.txt has no match for {pattern}")
        return m.group(1)

    return {
        "nvcc": find(r"\bV(\d+\.\d+\.\d+)"),
        "c++": "gcc " + find(r"^g\+\+ .* (\d+\.\d+\.\d+)$"),
        "binutils": find(r"^GNU ld .* (\d+\.\d+)$"),
        "cmake": find(r"^cmake version (\S+)"),
        "ninja": find(r"^(\d+\.\d+\.\d+\S*)$"),
        "scikit-build-core": find(r"scikit-build-core (\S+)"),
        "torch": find(r"^torch (\S+)"),
    }


def _option(command: str, name: str) -> str:
    m = re.search(rf"{name} (\S+)", command)
    if not m:
        raise SystemExit(f"command-a.txt has no {name}")
    return m.group(1)


def build() -> dict:
    command = (RUN2 / "command-a.txt").read_text().strip()
    src = _option(command, "--src")
    run2_record = json.loads((RUN2 / "build-info.json").read_text())
    conditions = {
        "kernel_dir": f"{src}/sgl-kernel",
        "sources_dir": _option(command, "--sources"),
        "python": _option(command, "--python"),
        **_env_versions((RUN2 / "env.txt").read_text()),
    }
    draft = reference.Reference(OUT, run2_record, conditions, "", WHEEL["name"], WHEEL["sha256"], WHEEL["size"], {}, {})
    record = reference.expected_record(draft)
    changed = {p for p, _a, _b in reference.json_differences(run2_record, record)}
    if changed != CHANGED_SINCE_RUN2:
        raise SystemExit(f"the record differs from run 2's in {sorted(changed ^ CHANGED_SINCE_RUN2)} unexpectedly")
    text = buildinfo.dumps(record).encode()
    with open(RUN2 / "members.tsv", newline="") as fh:
        rows = {r["member"]: r for r in csv.DictReader(fh, delimiter="\t")}
    members = {name: r["sha256_a"] for name, r in sorted(rows.items()) if not name.endswith(".dist-info/RECORD")}
    members[reference.BUILD_RECORD_MEMBER] = hashlib.sha256(text).hexdigest()
    generic = re.sub(r"--out \S+ --build-dir \S+", "--out OUT --build-dir BUILD", command)
    return {
        "schema_version": reference.SCHEMA_VERSION,
        "description": (
            "The reference sgl-kernel wheel: one configuration of `blackwell-stack kernel build` and the wheel it "
            "gave, bit for bit, on two machines of different sizes and job plans "
            "(benchmarks/kernel-reproducibility/). `kernel build` compares its own configuration with this one and, "
            "when they are the same, its wheel with this wheel; `wheel diff --reference WHEEL` compares any wheel; "
            "tests/test_kernel_reference.py fails as soon as the build record below no longer describes the "
            "repository (a patch, the recipe, a pin or the record's wording changed). Written by "
            "benchmarks/kernel-reproducibility/make_reference.py."
        ),
        "configuration": {
            "command": generic,
            "conditions": conditions,
            "conditions_notes": {
                "kernel_dir": "nvcc names internal-linkage entities after each .cu file's absolute path; the "
                "checkout's path is the same in every build of the method (a mount namespace shows each copy at "
                "/srv/sgl-src); docs/sgl-kernel.md",
                "sources_dir": "the FetchContent sources compile .cu files too (flash-attention's sparse units), "
                "named after their absolute paths likewise",
                "python": "torch's headers are found through the interpreter's venv, and their paths land in the "
                "libraries (__FILE__ in TORCH_CHECK's messages; no prefix map covers them)",
                "nvcc": "results/run2/env.txt; the build record keeps only the release (13.0)",
                "c++": "the host compiler for C++ and for nvcc; results/run2/env.txt",
                "binutils": "ld and ar; results/run2/env.txt",
                "cmake": "results/run2/env.txt",
                "ninja": "results/run2/env.txt",
                "scikit-build-core": "packs the wheel (wheel.reproducible); results/run2/env.txt",
                "torch": "compiled against (also in the build record); results/run2/env.txt",
            },
            "not_conditions": "the build and output directories (each build had its own, of different lengths), "
            "the job plan (16 jobs with 7 or 3 heavy units at a time) and the machine's size (32 cores and 256 GiB, "
            "16 cores and 128 GiB) did not change a byte",
            "build_record": record,
        },
        "result": {
            "wheel": WHEEL,
            "wheel_source": "benchmarks/kernel-reproducibility/results/rebuild-other-host/summary.md",
            "compiled": {name: {"sha256": rows[name]["sha256_a"], "size": int(rows[name]["size_a"])}
                         for name in ELF_MEMBERS},
            "members_source": "benchmarks/kernel-reproducibility/results/run2/members.tsv (908 members, the same in "
            "the rebuild), and sgl_kernel/_build_info.json: the sha256 of configuration.build_record as the wheel "
            "carries it (sorted keys, two-space indent, one trailing newline); RECORD follows from the others",
            "members": members,
        },
    }


def main(argv: list[str]) -> int:
    data = build()
    text = (json.dumps(data, indent=2, sort_keys=False) + "\n").encode()
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
