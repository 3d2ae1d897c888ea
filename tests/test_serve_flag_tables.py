"""Choosing the flag table by SGLang version, the same way in Python and Nix
(lib/sglang-service.nix: flagTableFor), and the error for a version without one."""

from __future__ import annotations

import json

import pytest

from blackwell_stack.data.profile import load_profile
from blackwell_stack.errors import DataError
from blackwell_stack.serve import flags


def test_default_table_is_the_default_profiles_sglang():
    assert flags.load_table().data["sglang_version"] == load_profile().runtime().sglang == "0.5.9"


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_a_table_is_chosen_by_version(version):
    table = flags.load_table(version)
    assert table.data["sglang_version"] == version
    assert table.path.name == f"{version}.json"


def test_a_version_without_a_table_says_how_to_extract_it():
    with pytest.raises(DataError) as err:
        flags.load_table("0.5.15")
    text = str(err.value)
    assert "no SGLang flag table for sglang 0.5.15" in text and "tables: 0.5.9, 0.5.23" in text
    assert flags.extract_command("0.5.15") in text
    assert "scripts/sglang-flags/flags_extract.py" in flags.extract_command("0.5.15")


def test_a_version_that_is_not_a_version_is_refused():
    with pytest.raises(Exception, match="PEP 440"):
        flags.load_table("../rules")


def test_a_misfiled_table_is_refused(tmp_path):
    data = json.loads(flags.table_path("0.5.9").read_text())
    path = tmp_path / "0.5.23.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"is 0.5.9, expected 0.5.23"):
        flags.load_table("0.5.23", path)


@pytest.mark.nix
def test_nix_chooses_the_same_tables(nix):
    got = nix.eval(
        "let s = import ./lib/sglang-service.nix; in "
        "{ versions = s.flagTableVersions; tables = map s.flagTableFor s.flagTableVersions; "
        "default = s.flagTable.sglang_version; }"
    )
    assert got["versions"] == flags.available_versions()
    assert got["tables"] == [flags.load_table(v).data for v in flags.available_versions()]
    assert got["default"] == flags.load_table().data["sglang_version"]


@pytest.mark.nix
def test_nix_names_the_extract_command_for_a_missing_table(nix):
    err = nix.eval_error('(import ./lib/sglang-service.nix).flagTableFor "0.5.15"')
    assert "no SGLang flag table for sglang 0.5.15" in err and "(tables: 0.5.9, 0.5.23)" in err
    assert flags.extract_command("0.5.15") in err
