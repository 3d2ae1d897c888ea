"""A pin of a filtered tree (pkgs/sgl-kernel/sources.json `filter`): the Python side and the Nix fetch select the
same files, a full upstream tree and a filtered one pass alike, and the offline sources match every pin a 12.0a
build reads, with no --allow-source-mismatch."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import cli, offline_sources

from blackwell_stack.kernel.inputs import nar, sourcedir, sources
from blackwell_stack.kernel.inputs.source_filter import Filter


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


KEEP = Filter(keep=("python/kernels/pkg", "LICENSE"))
DROP = Filter(drop=("docs", "media/images"))
FILES = {"LICENSE": "l", "README": "r", "python/kernels/pkg/a.py": "a", "python/kernels/pkg/sub/b.py": "b",
         "python/kernels/other.py": "o", "python/setup.py": "s", "docs/x.md": "x", "media/images/big.png": "p",
         "media/keep.txt": "k"}


@pytest.mark.parametrize("selected, left", [
    (KEEP, ["LICENSE", "python/kernels/pkg/a.py", "python/kernels/pkg/sub/b.py"]),
    (DROP, ["LICENSE", "README", "media/keep.txt", "python/kernels/other.py", "python/kernels/pkg/a.py",
            "python/kernels/pkg/sub/b.py", "python/setup.py"]),
])
def test_hashing_the_selection_is_hashing_the_filtered_tree(tmp_path, selected, left):
    full = tree(tmp_path / "full", FILES)
    applied = tree(tmp_path / "applied", FILES)
    selected.apply(applied)
    assert sorted(str(p.relative_to(applied)) for p in applied.rglob("*") if p.is_file()) == left
    assert nar.nar_hash_sri(full, selected.selects) == nar.nar_hash_sri(applied)
    staged = tmp_path / "staged"
    shutil.copytree(full, staged, ignore=selected.ignore(full))
    assert nar.nar_hash_sri(staged) == nar.nar_hash_sri(applied)


def test_a_kept_path_that_is_missing_is_refused(tmp_path):
    from blackwell_stack.errors import StackError
    root = tree(tmp_path / "t", {"LICENSE": "l"})
    with pytest.raises(StackError, match="python/kernels/pkg"):
        KEEP.apply(root)
    assert (root / "LICENSE").is_file()


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> Path:
    return offline_sources.layout(tmp_path_factory.mktemp("offline-sources"))


def post_fetch(nix, where: str) -> str:
    parts = where.split(".")
    name = parts[1]
    expr = f'let k = (import ./lib).kernelSources; s = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/sources.json); d = k.dependency s "{name}"; in '
    if len(parts) > 2:
        path = where.split(".submodules.", 1)[1]
        expr += f'(builtins.head (builtins.filter (x: x.path == "{path}") d.submodules)).args.postFetch'
    else:
        expr += "d.args.postFetch"
    return nix.eval(expr)


# Each filtered pin with an upstream-like tree made from the offline sources: the filtered files plus parts a
# full tree has and the filter removes.
UPSTREAM_EXTRAS = {
    "fetchcontent.repo-cutlass": ("repo-cutlass", {"media/images/x.png": "png", "docs/index.md": "d",
                                                   "test/unit/t.cu": "t"}),
    "fetchcontent.repo-triton": ("repo-triton", {"python/triton/__init__.py": "t", "README.md": "r",
                                                 "python/triton_kernels/pyproject.toml": "p"}),
    "fetchcontent.json": ("json", {}),  # the offline json is tag v3.11.3's tree with more than the release holds
}


@pytest.mark.proc
@pytest.mark.nix
@pytest.mark.parametrize("where", sorted(UPSTREAM_EXTRAS))
def test_the_nix_post_fetch_leaves_the_pinned_tree(nix, offline, tmp_path, where):
    name, extras = UPSTREAM_EXTRAS[where]
    pin = next(p for p in sources.pins(sources.load()) if p.where == where)
    out = tmp_path / "out"
    shutil.copytree(offline / "fc" / name, out, symlinks=True)
    tree(out, extras)
    assert nar.nar_hash_sri(out) != pin.entry["hash"]
    # fetchzip's postFetch runs in the builder's shell, which stops at the first failing command (stdenv's set -e)
    script = "set -euo pipefail\n" + post_fetch(nix, where)
    subprocess.run(["bash", "-c", script], check=True, env={"out": str(out), "TMPDIR": str(tmp_path),
                                                             "PATH": "/usr/bin:/bin"}, timeout=120)
    assert nar.nar_hash_sri(out) == pin.entry["hash"]


@pytest.mark.proc
@pytest.mark.nix
def test_the_nix_post_fetch_fails_when_a_kept_path_is_gone(nix, tmp_path):
    out = tree(tmp_path / "out", {"README.md": "r"})
    script = "set -euo pipefail\n" + post_fetch(nix, "fetchcontent.repo-triton")
    result = subprocess.run(["bash", "-c", script], env={"out": str(out), "TMPDIR": str(tmp_path),
                                                         "PATH": "/usr/bin:/bin"}, capture_output=True, timeout=120)
    assert result.returncode != 0


@pytest.mark.proc
def test_the_offline_sources_match_every_pin_a_12_0a_build_reads(offline):
    result = cli.run("kernel", "sources", "check", "--dir", str(offline / "fc"), "--arch", "12.0a", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    states = json.loads(result.stdout)
    assert {s["state"] for s in states["sources"]} == {"ok"}, states


def test_a_full_tree_passes_its_filtered_pin(offline, tmp_path):
    data = sources.load()
    entry = next(e for e in sourcedir.entries(data, ["12.0a"]) if e.relpath == "repo-triton")
    full = tmp_path / "repo-triton"
    shutil.copytree(offline / "fc" / "repo-triton", full)
    tree(full, UPSTREAM_EXTRAS["fetchcontent.repo-triton"][1])
    assert [s.state for s in sourcedir.check(tmp_path, [entry])] == [sourcedir.OK]


def test_the_offline_flashmla_cutlass_differs_from_its_pin_only_in_executable_bits(offline, tmp_path):
    data = sources.load()
    entry = next(e for e in sourcedir.entries(data, ["9.0a"]) if e.relpath == offline_sources.MISMATCHES_9_0A[0])
    assert [s.state for s in sourcedir.check(offline / "fc", [entry])] == [sourcedir.MISMATCH]
    copy = tmp_path / "cutlass"
    shutil.copytree(offline / "fc" / entry.relpath, copy)
    for rel in GIT_EXECUTABLE_AT_V3_9_0:
        (copy / rel).chmod(0o755)
    assert entry.hash_of(copy) == entry.expected


# The files of the submodule's filtered tree that git records with mode 100755 at v3.9.0 (e94e888d,
# `git ls-tree -r`); the offline bundle has them 644, and a NAR records the executable bit.
GIT_EXECUTABLE_AT_V3_9_0 = (
    "include/cute/arch/cluster_sm100.hpp",
    "include/cutlass/gemm/collective/builders/sm120_blockscaled_mma_builder.inl",
    "include/cutlass/gemm/collective/builders/sm120_blockscaled_sparse_mma_builder.inl",
    "include/cutlass/gemm/collective/sm120_blockscaled_mma_array_tma.hpp",
    "include/cutlass/gemm/collective/sm120_blockscaled_mma_tma.hpp",
    "include/cutlass/gemm/collective/sm120_blockscaled_sparse_mma_tma.hpp",
    "include/cutlass/gemm/device/symm.h",
    "include/cutlass/gemm/kernel/default_gemv.h",
    "include/cutlass/gemm/kernel/default_symm.h",
    "include/cutlass/gemm/kernel/default_symm_complex.h",
    "include/cutlass/gemm/kernel/default_symm_universal.h",
    "include/cutlass/gemm/kernel/gemm_params.h",
    "include/cutlass/gemm/kernel/gemv_batched_strided.h",
    "include/cutlass/gemm/kernel/sm100_tile_scheduler.hpp",
    "include/cutlass/gemm/kernel/sm100_tile_scheduler_group.hpp",
    "include/cutlass/gemm/kernel/symm_universal.h",
    "include/cutlass/gemm/threadblock/default_gemv_core.h",
    "include/cutlass/gemm/threadblock/gemv.h",
    "include/cutlass/transform/threadblock/predicated_tile_access_iterator_params.h",
)
