"""The own ELF/fatbin reader against NVIDIA's cuobjdump, on device code built here by nvcc 13 for sm_120a."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import cuobjdump

from blackwell_stack.doctor import inspection
from blackwell_stack.formats import elf, fatbin

pytestmark = pytest.mark.cuda

NVCC_CANDIDATES = ("/usr/local/cuda-13.0/bin/nvcc", "/usr/local/cuda/bin/nvcc")

KERNEL = (
    "__global__ void scale(float *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] *= a;\n"
    "}\n"
)


def _nvcc() -> str:
    found = shutil.which("nvcc") or next((p for p in NVCC_CANDIDATES if Path(p).is_file()), None)
    if found is None:
        pytest.skip("nvcc (CUDA 13) is not installed here: cannot build device code to read")
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """Objects and a standalone cubin/PTX for sm_120a, compiled now by this machine's nvcc."""
    nvcc = _nvcc()
    d = tmp_path_factory.mktemp("nvcc")
    (d / "k.cu").write_text(KERNEL)
    variants = {
        # cubin + PTX for sm_120a, default compression (PTX compressed, cubin not)
        "sm120a.o": ["-c", "-gencode", "arch=compute_120a,code=[sm_120a,compute_120a]"],
        # everything compressed: the arch must come from the headers alone
        "compressed.o": ["-c", "-gencode", "arch=compute_120a,code=sm_120a", "-gencode",
                         "arch=compute_120,code=compute_120", "--compress-mode=size"],
        # plain, family and older targets in one fatbin
        "mixed.o": ["-c", "-gencode", "arch=compute_120,code=sm_120", "-gencode", "arch=compute_100f,code=sm_100f",
                    "-gencode", "arch=compute_90,code=compute_90"],
        "k.cubin": ["-cubin", "-arch=sm_120a"],
        "k.ptx": ["-ptx", "-arch=sm_120a"],
    }
    out = {}
    for name, flags in variants.items():
        subprocess.run([nvcc, *flags, "k.cu", "-o", name], cwd=d, check=True, capture_output=True, timeout=300)
        out[name] = d / name
    return out


def _own(path: Path) -> list[fatbin.FatbinEntry]:
    return fatbin.fatbin_entries(elf.parse(path.read_bytes(), str(path)))


def test_sm120a_cubin_and_ptx_read_from_headers(built):
    entries = _own(built["sm120a.o"])
    assert {(e.kind, e.arch) for e in entries} == {("cubin", "sm_120a"), ("ptx", "sm_120a")}
    ptx = next(e for e in entries if e.kind == "ptx")
    assert ptx.compression == "zstd"  # nvcc 13 compresses PTX by default
    assert ptx.version.startswith("9.")  # PTX ISA 9.x from CUDA 13


@pytest.mark.parametrize("name", ["sm120a.o", "compressed.o", "mixed.o"])
def test_own_reader_agrees_with_cuobjdump(built, name):
    tool = cuobjdump.required()
    listing = cuobjdump.list_entries(tool, built[name])
    entries = _own(built[name])
    assert [cuobjdump.listing_name(e.arch) for e in entries if e.kind == "cubin"] == listing.cubin
    assert [cuobjdump.listing_name(e.arch) for e in entries if e.kind == "ptx"] == listing.ptx


def test_compressed_entries_are_reported_without_decompressing(built):
    entries = _own(built["compressed.o"])
    assert {(e.kind, e.arch, e.compression) for e in entries} == {
        ("cubin", "sm_120a", "zstd"),
        ("ptx", "sm_120", "zstd"),
    }


def test_family_and_plain_architectures(built):
    entries = _own(built["mixed.o"])
    assert [(e.kind, e.arch) for e in entries] == [("cubin", "sm_120"), ("cubin", "sm_100f"), ("ptx", "sm_90")]


def test_standalone_cubin_is_cuda_machine_code(built):
    e = elf.parse(built["k.cubin"].read_bytes(), "k.cubin")
    assert e.machine_name == "cuda"
    assert fatbin.fatbin_entries(e) == []  # a cubin is device code itself, no fatbin inside


def test_inspect_object_agrees_with_cuobjdump(built, tmp_path):
    report = inspection.inspect_path(str(built["sm120a.o"]))
    (f,) = report["files"]
    assert f["cubin"] == ["sm_120a"] and f["ptx"] == ["sm_120a"]
    assert cuobjdump.disagreements(cuobjdump.required(), report, built["sm120a.o"], tmp_path) == (1, [])
    assert report["notes"] == []


def test_ptx_text_is_not_elf(built):
    with pytest.raises(elf.NotElfError):
        elf.parse(built["k.ptx"].read_bytes(), "k.ptx")
