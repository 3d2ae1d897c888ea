"""The sgl-kernel recipe: lib/kernel-recipe.nix (real nix) and kernel.inputs.recipe give the same defines."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blackwell_stack.errors import DataError, StackError
from blackwell_stack.kernel.inputs import recipe

pytestmark = pytest.mark.nix

REAL = recipe.load()

_NIX_ALL = """
let
  kr = import ./lib/kernel-recipe.nix;
  cases = builtins.fromJSON (builtins.readFile {path});
in map (c:
  let args = {{ recipe = c.recipe; }}
    // (if c ? archs then {{ archs = c.archs; }} else {{ }})
    // (if c ? planned then {{ planned = c.planned; }} else {{ }});
  in {{ flags = kr.cmakeFlags args; env = kr.environment args; }}) cases
"""


def nix_render(nix, tmp_path, cases: list[dict]) -> list[dict]:
    """One nix-instantiate for a whole batch of cases."""
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    return nix.eval(_NIX_ALL.format(path=path))


def python_render(case: dict) -> dict:
    archs, planned = case.get("archs"), case.get("planned")
    return {
        "flags": recipe.cmake_flags(case["recipe"], archs, planned),
        "env": dict(sorted(recipe.environment(case["recipe"], archs, planned).items())),
    }


def test_real_recipe_same_on_both_sides(nix, tmp_path):
    cases = [
        {"recipe": REAL},
        {"recipe": REAL, "archs": "10.0a;12.0a"},
        {"recipe": REAL, "archs": ["9.0a", "12.0a"]},
        {"recipe": REAL, "planned": {"SGL_KERNEL_COMPILE_THREADS": 2, "CMAKE_BUILD_PARALLEL_LEVEL": 3, "MAX_JOBS": 3}},
        {"recipe": REAL, "planned": {"SGL_KERNEL_COMPILE_THREADS": 1, "SGL_KERNEL_JOB_POOLS": "sgl_kernel_heavy=4",
                                     "SGL_KERNEL_JOB_POOL_SOURCES": "csrc/a.cu=sgl_kernel_heavy,csrc/b.cu=sgl_kernel_heavy"}},
    ]
    got = nix_render(nix, tmp_path, cases)
    assert got == [python_render(c) for c in cases]
    # What the issue asks of the recipe, as the builder sees it.
    flags = got[0]["flags"]
    for expected in (
        "-DSGL_KERNEL_ENABLE_FP4=ON",
        "-DENABLE_BELOW_SM90=OFF",
        "-DSGL_KERNEL_ENABLE_FA3=OFF",
        "-DCMAKE_POLICY_VERSION_MINIMUM=3.5",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DSGL_KERNEL_CUDA_ARCHS=12.0a",
        "-DSGL_KERNEL_COMPILE_THREADS=1",
    ):
        assert expected in flags
    # Reproducibility: deterministic archives (ar D, ranlib -D) for every language CMake archives with.
    for lang in ("C", "CXX", "CUDA"):
        assert f"-DCMAKE_{lang}_ARCHIVE_CREATE=<CMAKE_AR> qcD <TARGET> <LINK_FLAGS> <OBJECTS>" in flags
        assert f"-DCMAKE_{lang}_ARCHIVE_FINISH=<CMAKE_RANLIB> -D <TARGET>" in flags
    # ... nvcc's temporary names and random symbol suffixes, and the wheel's timestamps.
    assert got[0]["env"] == {
        "CUDAFLAGS": "--objdir-as-tempdir -frandom-seed=sgl-kernel",
        "SOURCE_DATE_EPOCH": "315532800",
        "TORCH_CUDA_ARCH_LIST": "12.0a",
    }
    assert "-DSGL_KERNEL_COMPILE_THREADS=2" in got[3]["flags"]
    assert got[3]["env"]["MAX_JOBS"] == "3"
    assert "-DSGL_KERNEL_JOB_POOL_SOURCES=csrc/a.cu=sgl_kernel_heavy,csrc/b.cu=sgl_kernel_heavy" in got[4]["flags"]


def test_lib_default_exposes_kernel_recipe(nix):
    assert nix.eval('(import ./lib).kernelRecipe.archList "10.0a; 12.0a"') == ["10.0a", "12.0a"]


def test_unknown_arch_refused_alike(nix):
    with pytest.raises(StackError) as exc:
        recipe.cmake_flags(REAL, "7.5")
    message = exc.value.message
    assert "7.5" in message and "12.0a" in message
    err = nix.eval_error(
        "(import ./lib/kernel-recipe.nix).cmakeFlags { recipe = builtins.fromJSON "
        '(builtins.readFile ./pkgs/sgl-kernel/recipe.json); archs = "7.5"; }'
    )
    assert message in err


def _same_text(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("archs, use", [("9.0", "9.0a"), ("10.0", "10.0a"), ("12.0", "12.0a"),
                                         ("9.0;9.0a", "9.0a"), ("12.0;12.0a", "12.0a"), ("10.0;12.0", "10.0a, 12.0a")])
def test_plain_hopper_and_blackwell_targets_refused_alike(nix, tmp_path, archs, use):
    """A plain 9.0/10.0/12.0 target builds the CUTLASS GEMMs as stubs (wrong numbers, no error): refused on both sides,
    also when a recipe lists it as supported and also beside its a target."""
    lenient = copy.deepcopy(REAL)
    lenient["supported_archs"] += ["9.0", "10.0", "12.0"]
    with pytest.raises(StackError) as exc:
        recipe.cmake_flags(lenient, archs)
    message = exc.value.message
    assert message.startswith("plain CUDA architecture ") and message.endswith(f"use {use}")
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(lenient))
    err = nix.eval_error(f'(import ./lib/kernel-recipe.nix).cmakeFlags {{ recipe = builtins.fromJSON (builtins.readFile {path}); archs = "{archs}"; }}')
    assert _same_text(message) in _same_text(err)


def test_every_supported_arch_builds_alike(nix, tmp_path):
    """The recipe's own list passes the rule: each entry renders the same flags on both sides."""
    cases = [{"recipe": REAL, "archs": arch} for arch in REAL["supported_archs"]]
    assert nix_render(nix, tmp_path, cases) == [python_render(c) for c in cases]
    assert "9.0" not in REAL["supported_archs"] and "9.0a" in REAL["supported_archs"]


_NIX_VERDICTS = """
let
  kr = import ./lib/kernel-recipe.nix;
  cases = builtins.fromJSON (builtins.readFile {path});
  verdict = c: let r = builtins.tryEval (kr.checkArchs c.recipe c.archs); in if r.success then r.value else null;
in map verdict cases
"""


def _python_verdict(case: dict) -> str | None:
    try:
        return recipe.check_archs(case["recipe"], case["archs"])
    except StackError:
        return None


_ARCH_POOL = REAL["supported_archs"] + ["9.0", "10.0", "10.3", "12.0", "12.1", "8.6", "7.5", "10.0f", "09.0", "13.0", "x"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(st.sampled_from(_ARCH_POOL), max_size=4), st.integers(0, 13), st.booleans()),
                min_size=1, max_size=10))
def test_generated_arch_lists_accepted_or_refused_alike(nix, tmp_path, drawn):
    """Random lists against recipes with random thresholds and lenient supported lists: the same verdict and value."""
    cases = []
    for archs, from_major, lenient in drawn:
        rec = copy.deepcopy(REAL)
        rec["arch_specific_from_major"] = from_major
        if lenient:
            rec["supported_archs"] = list(_ARCH_POOL)
        cases.append({"recipe": rec, "archs": ";".join(archs)})
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(cases))
    assert nix.eval(_NIX_VERDICTS.format(path=path)) == [_python_verdict(c) for c in cases]


_names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True)
_values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)


@st.composite
def modified_case(draw) -> dict:
    rec = copy.deepcopy(REAL)
    rec["cmake_defines"].update(draw(st.dictionaries(_names, _values, max_size=5)))
    for name in draw(st.lists(st.sampled_from(sorted(REAL["cmake_defines"])), max_size=3)):
        rec["cmake_defines"].pop(name, None)
    rec["environment"] = draw(st.dictionaries(_names, _values, max_size=3))
    rec["arch_defines"] = draw(st.lists(_names, min_size=0, max_size=2)) + ["SGL_KERNEL_CUDA_ARCHS"]
    rec["arch_environment"] = draw(st.lists(_names, max_size=2))
    rec["planned_defines"] = draw(st.lists(_names, max_size=2)) + ["SGL_KERNEL_COMPILE_THREADS"]
    rec["planned_environment"] = draw(st.lists(_names, max_size=2))
    case = {"recipe": rec}
    if draw(st.booleans()):
        archs = draw(st.lists(st.sampled_from(REAL["supported_archs"]), min_size=1, max_size=3, unique=True))
        case["archs"] = ";".join(archs) if draw(st.booleans()) else archs
    if draw(st.booleans()):
        names = rec["planned_defines"] + rec["planned_environment"]
        case["planned"] = draw(st.dictionaries(st.sampled_from(names), st.integers(1, 256), max_size=4))
    return case


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(modified_case(), min_size=1, max_size=8))
def test_generated_recipes_same_on_both_sides(nix, tmp_path, cases):
    for case in cases:  # each is a recipe the Python side accepts: its shape, architectures and memory rule
        (tmp_path / "recipe.json").write_text(json.dumps(case["recipe"]))
        recipe.load(tmp_path / "recipe.json")
    assert nix_render(nix, tmp_path, cases) == [python_render(c) for c in cases]


@pytest.mark.parametrize(
    "field, value, named",
    [
        ("cmake_defines", {"SGL_KERNEL_ENABLE_FP4": True}, "SGL_KERNEL_ENABLE_FP4"),
        ("cmake_defines", {"BAD NAME": "x"}, "BAD NAME"),
        ("arch_defines", "SGL_KERNEL_CUDA_ARCHS", "arch_defines"),
        ("memory", {"per_nvcc_thread_peak_mib": 0, "headroom_mib": 1, "headroom_fraction": 0.1}, "per_nvcc_thread_peak_mib"),
        ("memory", {"per_nvcc_thread_peak_mib": 1, "headroom_mib": 1, "headroom_fraction": 0.1,
                    "unit_peaks_mib": {"../outside.cu": 5}}, "unit_peaks_mib"),
        ("memory", {"per_nvcc_thread_peak_mib": 1, "headroom_mib": 1, "headroom_fraction": 0.1,
                    "heavy_pool_share": 1.5}, "heavy_pool_share"),
        ("supported_archs", ["9.0", "9.0a", "12.0a"], "supported_archs"),
        ("arch_specific_from_major", "9", "arch_specific_from_major"),
        ("arch_specific_from_major", True, "arch_specific_from_major"),
    ],
)
def test_bad_recipe_named_by_field(tmp_path, field, value, named):
    bad = copy.deepcopy(REAL)
    bad[field] = value
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(DataError) as exc:
        recipe.load(path)
    assert str(path) in exc.value.message and named in exc.value.message


def test_memory_figure_is_the_measured_one(repo):
    """recipe.json's per-job figure is the largest single-target peak in the measurement results."""
    results = json.loads((repo / "benchmarks/kernel-compile-memory/results.json").read_text())
    single = [r for r in results["runs"] if r["gencode_archs"] == ["sm_120a"] and r["exit_code"] == 0]
    fp4_gemm = [r for r in single if "nvfp4_scaled_mm_kernels.cu" in r["translation_unit"]]
    assert {r["nvcc_threads"] for r in fp4_gemm} >= {1, 4}  # --threads does not change a one-target peak
    assert max(r["peak_tree_rss_mib"] for r in fp4_gemm) - min(r["peak_tree_rss_mib"] for r in fp4_gemm) < 64
    assert REAL["memory"]["per_nvcc_thread_peak_mib"] == max(r["peak_tree_rss_mib"] for r in single)
    # The rule charges each concurrent target that figure: an upper bound for the multi-target runs.
    for r in results["runs"]:
        concurrent = min(r["nvcc_threads"], len(r["gencode_archs"]))
        assert r["peak_tree_rss_mib"] <= concurrent * REAL["memory"]["per_nvcc_thread_peak_mib"]


def test_kernel_build_refuses_a_plain_hopper_target_before_anything_else(tmp_path):
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "kernel", "build", "--src", str(tmp_path), "--arch", "9.0",
                             "--dry-run"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "plain CUDA architecture 9.0 refused" in result.stderr and "use 9.0a" in " ".join(result.stderr.split())
