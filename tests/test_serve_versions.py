"""Version order and ranges: blackwell_stack.model.versions and lib/versions.nix agree with
each other and with packaging.version, on generated versions and on the edge cases a
stack can hand over (pre-releases, post and dev releases, local builds, epochs)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from blackwell_stack.errors import StackError
from blackwell_stack.model import versions

EDGES = [
    "0.5.9", "0.5.10", "0.5.23", "0.5.23.0", "0.5.023", "0.5.23rc1", "0.5.23a2", "0.5.23b1", "0.5.23.dev3",
    "0.5.23rc1.dev2", "0.5.23.post1", "0.5.23.post1.dev1", "0.5.23+cu130", "0.5.23+cu130.1", "0.5.23+1.cu130",
    "0.5.23+abc", "0.5.23+abc.2", "0.5.23+abc.10", "2.12.0.dev20260307+cu130", "2.12.0.dev20260307",
    "2.12.0+cu130", "2.12.0", "2.12.1", "1!0.1", "0!0.5.23", "1", "1.0.0.0.0", "0.6.6", "0.6.7", "0.6.10",
]
NOT_VERSIONS = ["v0.5.9", "0.5.9-rc1", "0.5.9RC1", "0.5", "0.5.", ".5", "0.5.9+", "0.5.9+cu-130", "0.5.9.rc1",
                "latest", "", "0.5.9 ", "1234567890123456789.0"]
NOT_VERSIONS.remove("0.5")  # "0.5" is a version


def py_cmp(a: str, b: str) -> int:
    va, vb = Version(a), Version(b)
    return (va > vb) - (va < vb)


def nix_compare(nix, tmp_path, pairs):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(pairs))
    return nix.eval(
        "let v = import ./lib/versions.nix; ps = builtins.fromJSON (builtins.readFile "
        f"{path}); in map (p: v.compare (builtins.elemAt p 0) (builtins.elemAt p 1)) ps"
    )


def test_edge_cases_order_as_packaging_does():
    for a, b in itertools.product(EDGES, EDGES):
        assert versions.compare(a, b) == py_cmp(a, b), (a, b)


@pytest.mark.nix
def test_nix_orders_the_edge_cases_the_same(nix, tmp_path):
    pairs = [list(p) for p in itertools.product(EDGES, EDGES)]
    assert nix_compare(nix, tmp_path, pairs) == [versions.compare(a, b) for a, b in pairs]


@pytest.mark.proc
def test_builtins_compare_versions_would_not_do(nix):
    # Why lib/versions.nix exists: Nix's own order puts a release before its release candidate.
    assert nix.eval('builtins.compareVersions "1.0" "1.0rc1"') == -1
    assert versions.compare("1.0", "1.0rc1") == 1


@pytest.mark.parametrize("bad", NOT_VERSIONS)
def test_what_is_not_a_version_is_refused(bad):
    with pytest.raises(StackError, match=r"PEP 440|digits"):
        versions.parse(bad)


@pytest.mark.nix
def test_nix_refuses_the_same(nix):
    for bad in NOT_VERSIONS:
        err = nix.eval_error(f"(import ./lib/versions.nix).compare {json.dumps(bad)} \"1.0\"")
        assert "is not a version in PEP 440 normal form" in err or "digits" in err, bad


numbers = st.integers(0, 12).map(str) | st.sampled_from(["20260307", "100"])
local_part = st.sampled_from(["cu130", "cu128", "1", "10", "abc", "rocm6"])
generated_version = st.builds(
    lambda epoch, release, pre, post, dev, local: epoch + ".".join(release) + pre + post + dev + local,
    st.sampled_from(["", "", "", "1!"]),
    st.lists(numbers, min_size=1, max_size=4),
    st.sampled_from(["", "", "a1", "b2", "rc1", "rc10"]),
    st.sampled_from(["", "", ".post1", ".post2"]),
    st.sampled_from(["", "", ".dev0", ".dev20260307"]),
    st.sampled_from(["", ""]) | st.lists(local_part, min_size=1, max_size=2).map(lambda p: "+" + ".".join(p)),
)


@given(st.lists(st.tuples(generated_version, generated_version), min_size=1, max_size=60))
@settings(max_examples=30, deadline=None)
def test_generated_versions_order_as_packaging_does(pairs):
    for a, b in pairs:
        assert versions.compare(a, b) == py_cmp(a, b), (a, b)


@pytest.mark.nix
@given(pairs=st.lists(st.tuples(generated_version, generated_version), min_size=100, max_size=100))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.large_base_example])
def test_nix_orders_generated_versions_the_same(nix, tmp_path, pairs):
    pairs = [list(p) for p in pairs]
    assert nix_compare(nix, tmp_path, pairs) == [versions.compare(a, b) for a, b in pairs]


RANGES = [
    {"min": "0.5.9", "max": "0.5.9"}, {"min": "0.5.9", "max": "0.5.23"}, {"below": "0.6.7"}, {"max": "0.6.6"},
    {"min": "0.6.7"}, {"min": "0.6.0", "below": "0.6.7"}, {"min": "2.12.0.dev20260307+cu130", "max": "2.12.0"},
]
PROBES = ["0.5.9", "0.5.9.post1", "0.5.9+cu130", "0.5.23", "0.5.23rc1", "0.6.6", "0.6.6.post1", "0.6.7rc1", "0.6.7",
          "0.7.2", "2.12.0.dev20260307+cu130", "2.12.0.dev20260308", "2.12.0"]


@pytest.mark.nix
def test_ranges_hold_the_same_on_both_sides(nix, tmp_path):
    path = tmp_path / "ranges.json"
    path.write_text(json.dumps({"ranges": RANGES, "probes": PROBES}))
    got = nix.eval(
        f"let v = import ./lib/versions.nix; d = builtins.fromJSON (builtins.readFile {path}); in "
        "{ shown = map v.showRange d.ranges; inside = map (r: map (p: v.inRange p r) d.probes) d.ranges; }"
    )
    assert got["shown"] == [versions.show_range(r) for r in RANGES]
    assert got["inside"] == [[versions.in_range(p, r) for p in PROBES] for r in RANGES]
    # A point range is that build only.
    assert [p for p in PROBES if versions.in_range(p, {"min": "0.5.9", "max": "0.5.9"})] == ["0.5.9"]
    assert not versions.in_range("0.6.7rc1", {"max": "0.6.6"}) and versions.in_range("0.6.7rc1", {"below": "0.6.7"})


def test_range_checks_and_overlap():
    assert versions.check_range({"min": "0.5.9", "max": "0.5.9"}) is None
    assert "not both" in versions.check_range({"max": "1", "below": "2"})
    assert versions.check_range({"from": "1"}) is not None
    assert "PEP 440" in versions.check_range({"min": "v1"})
    assert versions.overlap({"max": "0.6.6"}, {"min": "0.6.6"})
    assert not versions.overlap({"max": "0.6.6"}, {"min": "0.6.7"})
    assert not versions.overlap({"below": "0.6.7"}, {"min": "0.6.7"})
    assert versions.overlap({"min": "0.5.9", "max": "0.5.9"}, {"min": "0.5.9", "max": "0.5.23"})
    assert not versions.overlap({"min": "0.5.9", "max": "0.5.9"}, {"min": "0.5.23", "max": "0.5.23"})
