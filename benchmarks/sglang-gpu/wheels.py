"""The stable lock's wheels the GPU machine lacks, downloaded by their locked sha256, in chunks a call carries.

    python benchmarks/sglang-gpu/wheels.py DEST [--chunk-mib 56] [--lock-torch]

The GPU machine (no network) has its own torch 2.11 cu130 with its NVIDIA libraries, triton and the
scientific stack; everything else SGLang 0.5.9 needs comes from stacks/stable/uv.lock, the file uv
would install on Ubuntu 24.04 (glibc 2.39), checked against the lock's sha256. Left out, each with why:
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from blackwell_stack.data import stack as stacks  # noqa: E402
from blackwell_stack.data import wheel_choice  # noqa: E402
from blackwell_stack.data.lock import sha256_of  # noqa: E402
from blackwell_stack.download import download  # noqa: E402

# What the machine's own environment provides (its torch and what that torch needs), or what the run does
# without (flashinfer-cubin: 253 MB of prebuilt kernels; without it flashinfer compiles them just in time).
LEFT_OUT = {
    "torch": "the machine's torch 2.11.0+cu130 stands in for 2.12.1 (the kernel is built against it)",
    "torchvision": "the machine's, paired with its torch",
    "torchaudio": "the machine's, paired with its torch",
    "triton": "the machine's 3.6.0, paired with its torch",
    "flashinfer-cubin": "253 MB; flashinfer JIT-compiles what the run uses instead",
    "cuda-toolkit": "the machine's NVIDIA libraries (its torch's)",
    "nvidia-cutlass-dsl": "58 MB; only CuTe DSL kernels (FA4, quack) import it, and the run uses none",
    "numpy": "the machine's", "scipy": "the machine's", "pandas": "the machine's", "pyarrow": "the machine's",
    "sympy": "the machine's (torch's)", "networkx": "the machine's (torch's)", "mpmath": "the machine's (torch's)",
    "jinja2": "the machine's (torch's)", "markupsafe": "the machine's (torch's)", "filelock": "the machine's (torch's)",
    "fsspec": "the machine's (torch's)", "typing-extensions": "the machine's (torch's)",
    "setuptools": "the machine's",
}
# With --lock-torch the run is on the lock's torch 2.12.1 (device.sh's SGLANG_GPU_TORCH_WHEELS: torch and NCCL in
# a copy of the machine's venv), so the packages paired with torch come from the lock too.
PAIRED_WITH_TORCH = ("torchvision", "torchaudio", "triton")
GLIBC_OF_THE_MACHINE = (2, 39)  # Ubuntu 24.04


def selected(lock_torch: bool = False) -> list[tuple[str, str, str, int, str]]:
    """(name, file name, url, size, sha256) of every wheel to carry."""
    st = stacks.load("stable")
    target = wheel_choice.Target(glibc=GLIBC_OF_THE_MACHINE)
    left_out = {k: v for k, v in LEFT_OUT.items() if not (lock_torch and k in PAIRED_WITH_TORCH)}
    out = []
    for pkg in st.lock().packages.values():
        if pkg.name in left_out or pkg.source.get("virtual") or not pkg.wheels:
            continue
        # The NVIDIA libraries are the machine's (its torch's); the two pure-Python NVIDIA packages are carried.
        if pkg.name.startswith("nvidia-") and pkg.name not in ("nvidia-cudnn-frontend", "nvidia-ml-py"):
            continue
        wheel = wheel_choice.uv_choice(pkg, target)
        if wheel is None:
            raise SystemExit(f"{pkg.name} {pkg.version}: no wheel for the machine in the lock")
        out.append((pkg.name, wheel_choice.filename(wheel), wheel["url"], int(wheel.get("size") or 0), sha256_of(wheel)))
    return sorted(out, key=lambda row: -row[3])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dest", type=Path)
    p.add_argument("--chunk-mib", type=int, default=56)
    p.add_argument("--lock-torch", action="store_true", help="the run is on the lock's torch: carry its pairs too")
    args = p.parse_args()
    rows = selected(args.lock_torch)
    chunks: list[list] = []
    for row in rows:  # largest first, each into the first chunk it fits
        for chunk in chunks:
            if sum(r[3] for r in chunk) + row[3] <= args.chunk_mib << 20:
                chunk.append(row)
                break
        else:
            chunks.append([row])
    for i, chunk in enumerate(chunks, 1):
        folder = args.dest / f"chunk{i}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, file, url, size, sha in chunk:
            target = folder / file
            if not (target.is_file() and target.stat().st_size == size):
                download(url, target, expected_sha256=sha, label=name)
        print(f"{folder}: {len(chunk)} wheels, {sum(r[3] for r in chunk) / 2**20:.1f} MiB")
    print(f"{len(rows)} wheels, {sum(r[3] for r in rows) / 2**20:.1f} MiB in {len(chunks)} chunks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
