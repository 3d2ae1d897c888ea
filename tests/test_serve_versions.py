"""Versions and the rules' version conditions (blackwell_stack.data.versions): versions in normal form
only, and PEP 440 specifier sets matched as packaging matches them."""

from __future__ import annotations

import pytest

from blackwell_stack.data import versions
from blackwell_stack.errors import StackError

NOT_VERSIONS = ["v0.5.9", "0.5.9-rc1", "0.5.9RC1", "0.5", "0.5.", ".5", "0.5.9+", "0.5.9+cu-130", "0.5.9.rc1",
                "latest", "", "0.5.9 ", "0.5.023", "0!0.5.23"]  # the last two: forms packaging would normalise
NOT_VERSIONS.remove("0.5")  # "0.5" is a version



@pytest.mark.parametrize("bad", NOT_VERSIONS)
def test_what_is_not_a_version_is_refused(bad):
    with pytest.raises(StackError, match=r"PEP 440"):
        versions.parse(bad)


PROBES = ["0.5.9", "0.5.9.post1", "0.5.9+cu130", "0.5.23", "0.5.23rc1", "0.6.6", "0.6.6.post1", "0.6.7rc1", "0.6.7",
          "0.7.2", "2.12.0.dev20260307+cu130", "2.12.0.dev20260308", "2.12.0"]


def test_specifier_sets_hold_as_pep_440_says():
    assert [p for p in PROBES if versions.holds(p, "==0.5.9")] == ["0.5.9", "0.5.9+cu130"]  # local labels ignored
    assert [p for p in PROBES if versions.holds(p, ">=0.6.0,<0.6.7")] == ["0.6.6", "0.6.6.post1"]
    assert versions.holds("0.6.7rc1", ">=0.6.7rc1") and not versions.holds("0.6.7rc1", "<0.6.7")
    assert versions.holds("0.6.7rc1", ">=0.6.6") and versions.holds("2.12.0.dev20260308", "<=2.12.0")  # pre-releases
    assert not versions.holds("2.12.0.dev20260308", "<2.12.0")  # `<V` leaves out V's own pre-releases (PEP 440)


@pytest.mark.parametrize("bad", ["", "0.5.9", "=>0.5.9", ">=v0.5.9", "==0.5.023", 7, None])
def test_what_is_not_a_specifier_set_is_refused(bad):
    with pytest.raises(StackError, match=r"PEP 440"):
        versions.specifiers(bad)


def test_overlap_names_a_version_both_hold_for():
    assert versions.overlap("<=0.6.6", ">=0.6.6") == "0.6.6"
    assert versions.overlap("<=0.6.6", ">=0.6.7") is None
    assert versions.overlap("<0.6.7", ">=0.6.7") is None
    assert versions.overlap("==0.5.9", ">=0.5.9,<=0.5.23") == "0.5.9"
    assert versions.overlap("==0.5.9", "==0.5.23") is None


def test_sets_are_shown_with_exact_releases_as_versions():
    assert versions.show(["==0.5.9", "<=0.6.6", ">=0.6.0,<0.6.7"]) == "0.5.9, <=0.6.6, >=0.6.0,<0.6.7"
    assert versions.show([]) == "none"
