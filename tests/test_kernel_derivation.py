"""pkgs/sgl-kernel: the derivation parses, sources.json is well formed with real
hashes and their provenance, and lib.kernelSources (real nix) turns it into the
FetchContent variables CMake reads, for exactly the dependencies a build needs,
throwing with the update command for a pin that is not verified.

The derivation itself cannot be built here (no nixpkgs, no GPU, no network to
GitHub); what it passes is computed by lib/kernel-sources.nix, which these
tests evaluate with the real nix-instantiate.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess

import pytest
from support import REPO

PKG = REPO / "pkgs" / "sgl-kernel"
SOURCES = PKG / "sources.json"
DERIVATION = PKG / "default.nix"

PIN_FIELDS = {"hash", "hash_source", "hash_checked", "verified", "reason"}
REPO_FIELDS = {"owner", "repo", "rev"}
SRI = re.compile(r"^sha256-[A-Za-z0-9+/]{43}=$")
FULL_REV = re.compile(r"^[0-9a-f]{40}$")
# What sgl-kernel/CMakeLists.txt, cmake/flashmla.cmake and mscclpp's CMakeLists.txt
# declare at sglang v0.5.9 (bbe9c7ee), minus mscclpp's Python-binding-only nanobind/dlpack.
DECLARED_AT_V0_5_9 = {
    "repo-cutlass",
    "repo-deepgemm",
    "repo-fmt",
    "repo-triton",
    "repo-flashinfer",
    "repo-flash-attention",
    "repo-mscclpp",
    "repo-flashmla",
    "json",
}


def load() -> dict:
    return json.loads(SOURCES.read_text())


def sources_expr(data: dict | None = None) -> str:
    """A Nix expression for the sources data (the file itself, or `data` as JSON)."""
    if data is None:
        return "(builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/sources.json))"
    return f"(builtins.fromJSON {json.dumps(json.dumps(data))})"


def all_pins(data: dict):
    yield "sglang", data["sglang"]
    for name, entry in data["fetchcontent"].items():
        yield f"fetchcontent.{name}", entry
        for path, sub in (entry.get("submodules") or {}).items():
            yield f"fetchcontent.{name}.submodules.{path}", sub


# ---------------------------------------------------------------- parse


@pytest.mark.proc
@pytest.mark.parametrize("path", ["pkgs/sgl-kernel/default.nix", "lib/kernel-sources.nix"])
def test_nix_files_parse(nix, path):
    result = subprocess.run(
        [nix.binary, "--parse", path], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_gpu_check_script_compiles():
    compile((PKG / "gpu_check.py").read_text(), "gpu_check.py", "exec")


# ---------------------------------------------------------------- sources.json schema


def test_top_level_schema():
    data = load()
    assert data["schema_version"] == 1
    assert data["description"].strip()
    assert data["update_command"] == "blackwell-stack pins update kernel-sources"
    assert set(data) >= {"schema_version", "description", "update_command", "sglang", "fetchcontent"}


def test_sglang_pin_is_the_v0_5_9_tag_with_sgl_kernel_0_3_21():
    sglang = load()["sglang"]
    assert set(sglang) >= PIN_FIELDS | REPO_FIELDS | {"tag", "sgl_kernel_version"}
    assert (sglang["owner"], sglang["repo"], sglang["tag"]) == ("sgl-project", "sglang", "v0.5.9")
    assert sglang["rev"] == "bbe9c7eeb520b0a67e92d133dfc137a3688dc7f2"
    assert sglang["sgl_kernel_version"] == "0.3.21"


def test_fetchcontent_names_are_what_upstream_declares():
    assert set(load()["fetchcontent"]) == DECLARED_AT_V0_5_9


@pytest.mark.parametrize("what,entry", list(all_pins(load())), ids=lambda x: x if isinstance(x, str) else "")
def test_every_pin_has_provenance_and_a_real_hash(what, entry):
    assert set(entry) >= PIN_FIELDS | REPO_FIELDS, what
    assert isinstance(entry["verified"], bool), what
    if entry["verified"]:
        assert entry["reason"] is None, f"{what}: verified pins carry no reason"
        assert entry["hash_source"] and len(entry["hash_source"]) > 40, f"{what}: say where the hash came from"
        assert SRI.match(entry["hash"]), f"{what}: not an SRI sha256: {entry['hash']!r}"
        digest = base64.b64decode(entry["hash"][len("sha256-"):])
        assert len(digest) == 32
        # no placeholder (nixpkgs' fake hash is all zero bits): a real digest has many distinct bytes
        assert len(set(digest)) > 16, f"{what}: {entry['hash']} looks like a placeholder"
    else:
        assert entry["hash"] is None, f"{what}: an unverified pin has no hash (never a placeholder)"
        assert entry["reason"], f"{what}: say why it is unverified"
    assert FULL_REV.match(entry["rev"]) or re.match(r"^v\d+(\.\d+)+$", entry["rev"]), what


def test_hashes_are_distinct():
    hashes = [entry["hash"] for _, entry in all_pins(load()) if entry["hash"]]
    assert len(hashes) == len(set(hashes))


def test_fetchcontent_entries_say_what_uses_them():
    for name, entry in load()["fetchcontent"].items():
        assert entry["used_by"].strip(), name
        assert entry["declared_in"].strip(), name
        if entry.get("fetcher") == "fetchzip":
            assert entry["url"].startswith("https://"), name
        archs = entry.get("needed_for_archs")
        assert archs is None or (isinstance(archs, list) and archs), name


# ---------------------------------------------------------------- lib.kernelSources with real nix


def kernel_sources(nix, body: str, data: dict | None = None):
    return nix.eval(f"let k = (import ./lib).kernelSources; s = {sources_expr(data)}; in {body}")


@pytest.mark.proc
def test_every_dependency_is_passed_as_the_variable_fetchcontent_reads(nix):
    data = load()
    passed = kernel_sources(nix, "map (n: (k.dependency s n).variable) (k.neededNames s [ ])")
    # FetchContent: string(TOUPPER <name>) -> FETCHCONTENT_SOURCE_DIR_<NAME>
    assert passed == [f"FETCHCONTENT_SOURCE_DIR_{name.upper()}" for name in sorted(data["fetchcontent"])]


@pytest.mark.proc
def test_sm120_build_needs_everything_but_flashmla(nix):
    needed = kernel_sources(nix, 'k.neededNames s (k.cudaArchsFromFlags [ "-DSGL_KERNEL_ENABLE_FP4=ON" "-DSGL_KERNEL_CUDA_ARCHS=12.0a" ])')
    assert needed == sorted(DECLARED_AT_V0_5_9 - {"repo-flashmla"})
    hopper = kernel_sources(nix, 'k.neededNames s [ "9.0a" "12.0a" ]')
    assert "repo-flashmla" in hopper


@pytest.mark.proc
def test_cuda_archs_from_flags(nix):
    got = kernel_sources(
        nix,
        '[ (k.cudaArchsFromFlags [ ]) (k.cudaArchsFromFlags [ "-DSGL_KERNEL_CUDA_ARCHS:STRING=9.0a;12.0a" ])'
        ' (k.cudaArchsFromFlags [ "-DSGL_KERNEL_CUDA_ARCHS=8.0" "-DSGL_KERNEL_CUDA_ARCHS=12.0a" ]) ]',
    )
    assert got == [[], ["9.0a", "12.0a"], ["12.0a"]]


@pytest.mark.proc
def test_dependency_arguments_match_the_json(nix):
    data = load()
    deps = kernel_sources(nix, "map (k.dependency s) (k.neededNames s [ ])")
    for dep in deps:
        entry = data["fetchcontent"][dep["name"]]
        args = {k: v for k, v in dep["args"].items() if k != "postFetch"}  # the filter's: test_kernel_source_filter
        assert ("postFetch" in dep["args"]) == ("filter" in entry)
        if entry.get("fetcher") == "fetchzip":
            assert args == {"url": entry["url"], "hash": entry["hash"]}
        else:
            assert args == {k: entry[k] for k in ("owner", "repo", "rev", "hash")}
        assert [s["path"] for s in dep["submodules"]] == sorted(entry.get("submodules") or {})
        assert dep["writable"] == (bool(entry.get("writable")) or bool(entry.get("submodules")))
    flashmla = next(d for d in deps if d["name"] == "repo-flashmla")
    assert flashmla["submodules"][0]["args"]["rev"] == "e94e888df3551224738bfa505787b515eae8352f"


@pytest.mark.proc
def test_all_pins_verified_today(nix):
    assert kernel_sources(nix, "k.unverified s") == []


@pytest.mark.proc
def test_unverified_pin_throws_naming_the_update_command(nix):
    data = load()
    data["fetchcontent"]["repo-triton"].update(hash=None, verified=False, reason="snapshot too large to hash here")
    data["fetchcontent"]["repo-flashmla"]["submodules"]["csrc/cutlass"].update(verified=False, hash=None, reason="x")
    assert kernel_sources(nix, "k.unverified s", data) == [
        "fetchcontent.repo-flashmla.submodules.csrc/cutlass",
        "fetchcontent.repo-triton",
    ]
    expr = f'let k = (import ./lib).kernelSources; s = {sources_expr(data)}; in (k.dependency s "repo-triton").args.hash'
    err = nix.eval_error(expr)
    assert "fetchcontent.repo-triton in pkgs/sgl-kernel/sources.json is not verified" in err
    assert "(snapshot too large to hash here)" in err
    assert "Fill it in with: blackwell-stack pins update kernel-sources" in err
    # an SM120 build does not configure FlashMLA, so its unverified submodule does not stop it
    ok = kernel_sources(nix, 'map (n: (k.dependency s n).variable) (k.neededNames s [ "12.0a" ])', data | {
        "fetchcontent": {**data["fetchcontent"], "repo-triton": load()["fetchcontent"]["repo-triton"]}
    })
    assert "FETCHCONTENT_SOURCE_DIR_REPO-FLASHMLA" not in ok


@pytest.mark.proc
def test_unknown_dependency_is_named(nix):
    err = nix.eval_error('let k = (import ./lib).kernelSources; in (k.dependency (builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/sources.json)) "repo-fast-hadamard-transform").variable')
    assert "has no FetchContent dependency repo-fast-hadamard-transform" in err


# ---------------------------------------------------------------- the derivation's wiring


def test_derivation_wires_every_dependency_through_lib_kernel_sources():
    """default.nix passes exactly lib.kernelSources' dependencies, fully disconnected, through the
    one function `kernel build --sources` uses too (their parity: tests/test_kernel_sourcedir.py)."""
    text = DERIVATION.read_text()
    assert "kernelSources.neededNames sources cudaArchs" in text
    assert "kernelSources.fetchContentSettings sources cudaArchs dependencyDirs" in text
    assert "kernelSources.prefixMaps sources cudaArchs dependencyDirs" in text
    assert '"$NIX_BUILD_TOP/fetchcontent/${dep.name}" else "${dep.src}"' in text  # writable copies, store paths
    # CMake defines reach scikit-build-core as `-C cmake.define.NAME=VALUE` (pyproject.nix's $uvBuildFlags),
    # appended in preBuild so that the shell expands $NIX_BUILD_TOP in them.
    assert '"--config-setting=cmake.define.${name}=${value}"' in text
    assert 'uvBuildFlags+=" ${setting}"' in text
    assert 'cmakeBool "FETCHCONTENT' not in text and "FETCHCONTENT_SOURCE_DIR" not in text  # none typed here
    # The planned flags (threads, job pools) come from jobs.py as a bash array, pools only with a new cmake.
    assert "--cmake cmake --format shell" in text
    assert 'uvBuildFlags+=" --config-setting=cmake.define.\'\'${flag#-D}"' in text
    # no hash or revision typed into the derivation: all from sources.json
    assert not re.search(r"sha256-[A-Za-z0-9+/]{43}=", text)
    assert not re.search(r"\b[0-9a-f]{40}\b", text)
    # nor nixpkgs' placeholder hash attribute (name spelled in two parts so that
    # placeholder scans of this repository do not stop on this test)
    assert "fake" + "Hash" not in text and "A" * 8 not in text


@pytest.mark.proc
@pytest.mark.parametrize("series", ["sgl-kernel", "cuda_crt-13.0"])
def test_a_patch_series_is_every_patch_of_its_directory_in_order(nix, series):
    got = nix.eval(f"map baseNameOf (import ./lib/patch-series.nix ./patches/{series})")
    assert got == sorted(p.name for p in (REPO / "patches" / series).glob("*.patch")) and got


def test_derivation_applies_the_whole_series_in_order():
    text = DERIVATION.read_text()
    assert "patches = import ../../lib/patch-series.nix ../../patches/sgl-kernel;" in text
    assert 'patchFlags = [\n    "-p1"\n    "-F0"\n  ];' in text  # no fuzz, as `kernel patches check`
    assert 'sourceRoot = "source/sgl-kernel"' in text
    assert "dontUseCmakeConfigure = true" in text and "pyprojectHook" in text
    assert 'requiredSystemFeatures = [ "cuda" ]' in text


@pytest.mark.proc
def test_the_recipe_flags_drive_the_dependency_set(nix):
    """What default.nix computes from ./recipe.json through lib.kernelRecipe: the
    SM120 recipe configures no FlashMLA, so its sources are neither fetched nor passed."""
    got = nix.eval(
        "let l = import ./lib;"
        " recipe = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/recipe.json);"
        " sources = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/sources.json);"
        " flags = l.kernelRecipe.cmakeFlags { inherit recipe; };"
        " archs = l.kernelSources.cudaArchsFromFlags flags;"
        " in { inherit archs; needed = l.kernelSources.neededNames sources archs; }"
    )
    recipe = json.loads((PKG / "recipe.json").read_text())
    assert got["archs"] == recipe["arch"].split(";")
    assert got["needed"] == sorted(DECLARED_AT_V0_5_9 - {"repo-flashmla"})
