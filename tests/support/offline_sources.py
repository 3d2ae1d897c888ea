"""The offline sgl-kernel sources laid out as `kernel sources fetch` lays them out.

`shared/kernel-build` next to the checkout (or $BLACKWELL_STACK_KERNEL_SOURCES) holds the sglang tree and the
FetchContent sources (sgl-kernel-0.3.21-sources.tar.xz: repo-triton there is a placeholder), triton's
triton_kernels package (triton-kernels-v3.5.1.tar.xz: what the repo-triton pin's filter keeps) and FlashMLA with
its cutlass submodule (flashmla-*.tar.xz). `layout` puts them as DIR/sglang and DIR/fc/<name>, the submodule apart
under fc/repo-flashmla.submodules/, as `kernel build --sources` reads them.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

import pytest

from support import REPO

ENV = "BLACKWELL_STACK_KERNEL_SOURCES"
SOURCES_TARBALL = "sgl-kernel-0.3.21-sources.tar.xz"
TRITON_TARBALL = "triton-kernels-v3.5.1.tar.xz"
FLASHMLA_GLOB = "flashmla-*.tar.xz"
# The one difference from the pins left in the bundle: its FlashMLA cutlass lost git's executable bit on 19 headers.
MISMATCHES_9_0A = ("repo-flashmla.submodules/csrc/cutlass",)


def directory() -> Path:
    return Path(os.environ.get(ENV) or REPO.parent / "shared" / "kernel-build")


def _extract(tarball: Path, dest: Path) -> None:
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="tar")


def layout(dest: Path) -> Path:
    """dest/sglang and dest/fc/<name>, unpacked; skips the test, saying what is missing, without the bundles."""
    base = directory()
    flashmla = sorted(base.glob(FLASHMLA_GLOB))
    for name in (SOURCES_TARBALL, TRITON_TARBALL):
        if not (base / name).is_file():
            pytest.skip(f"no {name} at {base} (set {ENV} to the directory that holds it)")
    if not flashmla:
        pytest.skip(f"no {FLASHMLA_GLOB} at {base} (set {ENV} to the directory that holds it)")
    _extract(base / SOURCES_TARBALL, dest)
    fc = dest / "fc"
    shutil.rmtree(fc / "repo-triton")
    _extract(base / TRITON_TARBALL, dest / "triton")
    (dest / "triton" / "triton-kernels-v3.5.1").rename(fc / "repo-triton")
    (dest / "triton").rmdir()
    _extract(flashmla[0], fc)
    submodule = fc / "repo-flashmla.submodules" / "csrc" / "cutlass"
    submodule.parent.mkdir(parents=True)
    (fc / "repo-flashmla" / "csrc" / "cutlass").rename(submodule)
    (fc / "repo-flashmla" / "csrc" / "cutlass").mkdir()  # as GitHub's archive leaves a submodule: empty
    return dest
