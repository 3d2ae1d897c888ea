"""Version order and ranges: blackwell_stack.data.versions orders as packaging.version does, on
generated versions and on the edge cases a stack can hand over (pre-releases, post and dev
releases, local builds, epochs), and refuses what is not written in normal form."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from blackwell_stack.data import versions
from blackwell_stack.errors import StackError

EDGES = [
    "0.5.9", "0.5.10", "0.5.23", "0.5.23.0", "0.5.23rc1", "0.5.23a2", "0.5.23b1", "0.5.23.dev3",
    "0.5.23rc1.dev2", "0.5.23.post1", "0.5.23.post1.dev1", "0.5.23+cu130", "0.5.23+cu130.1", "0.5.23+1.cu130",
    "0.5.23+abc", "0.5.23+abc.2", "0.5.23+abc.10", "2.12.0.dev20260307+cu130", "2.12.0.dev20260307",
    "2.12.0+cu130", "2.12.0", "2.12.1", "1!0.1", "1", "1.0.0.0.0", "0.6.6", "0.6.7", "0.6.10",
]
NOT_VERSIONS = ["v0.5.9", "0.5.9-rc1", "0.5.9RC1", "0.5", "0.5.", ".5", "0.5.9+", "0.5.9+cu-130", "0.5.9.rc1",
                "latest", "", "0.5.9 ", "0.5.023", "0!0.5.23"]  # the last two: forms packaging would normalise
NOT_VERSIONS.remove("0.5")  # "0.5" is a version


def py_cmp(a: str, b: str) -> int:
    va, vb = Version(a), Version(b)
    return (va > vb) - (va < vb)


def test_edge_cases_order_as_packaging_does():
    for a, b in itertools.product(EDGES, EDGES):
        assert versions.compare(a, b) == py_cmp(a, b), (a, b)


@pytest.mark.parametrize("bad", NOT_VERSIONS)
def test_what_is_not_a_version_is_refused(bad):
    with pytest.raises(StackError, match=r"PEP 440"):
        versions.parse(bad)


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


RANGES = [
    {"min": "0.5.9", "max": "0.5.9"}, {"min": "0.5.9", "max": "0.5.23"}, {"below": "0.6.7"}, {"max": "0.6.6"},
    {"min": "0.6.7"}, {"min": "0.6.0", "below": "0.6.7"}, {"min": "2.12.0.dev20260307+cu130", "max": "2.12.0"},
]
PROBES = ["0.5.9", "0.5.9.post1", "0.5.9+cu130", "0.5.23", "0.5.23rc1", "0.6.6", "0.6.6.post1", "0.6.7rc1", "0.6.7",
          "0.7.2", "2.12.0.dev20260307+cu130", "2.12.0.dev20260308", "2.12.0"]


def test_ranges_show_and_hold():
    assert [versions.show_range(r) for r in RANGES] == ["0.5.9", "0.5.9..0.5.23", "<0.6.7", "<=0.6.6", ">=0.6.7",
                                                        ">=0.6.0,<0.6.7", "2.12.0.dev20260307+cu130..2.12.0"]
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
