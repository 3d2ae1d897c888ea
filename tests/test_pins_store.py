"""Pins files: schema validation names the file, the entry and the field; CLI exit codes."""

from __future__ import annotations

import copy
import json

import pytest

from blackwell_stack.cli import main
from blackwell_stack.data.pins import load_pins, unverified
from blackwell_stack.errors import DataError, ExitCode


@pytest.fixture
def torch_pins(repo):
    return json.loads((repo / "stacks/nightly/pins.json").read_text())


def write(tmp_path, data):
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_repo_pins_files_are_valid(repo):
    pins = load_pins(repo / "stacks/nightly/pins.json")
    assert {u["package"] for u in unverified(pins)} == {"torch", "triton"}


@pytest.mark.parametrize(
    "mutate, entry, field",
    [
        (lambda d: d["packages"]["torch"]["wheels"]["x86_64-linux-312"].pop("url"), "packages.torch.wheels.x86_64-linux-312", "url"),
        (lambda d: d["packages"]["torch"]["wheels"]["x86_64-linux-312"].update(hash="abc"), "packages.torch.wheels.x86_64-linux-312", "hash"),
        (lambda d: d["packages"]["torch"]["wheels"]["x86_64-linux-312"].update(verified="yes"), "packages.torch.wheels.x86_64-linux-312", "verified"),
        (lambda d: d["packages"]["torch"]["wheels"]["x86_64-linux-312"].update(reason=None), "packages.torch.wheels.x86_64-linux-312", "reason"),
        (lambda d: d["packages"]["torch"]["wheels"]["x86_64-linux-312"].update(hash_checked="computed here"),
         "packages.torch.wheels.x86_64-linux-312", "hash_checked"),
        (lambda d: d["packages"]["torch"]["wheels"]["x86_64-linux-312"].pop("hash_checked"),
         "packages.torch.wheels.x86_64-linux-312", "hash_checked"),
        (lambda d: d["packages"]["triton"]["wheels"]["x86_64-linux-312"].update(verified=True), "packages.triton.wheels.x86_64-linux-312", "filename"),
        (lambda d: d["packages"]["torch"].update(wheels={}), "packages.torch", "wheels"),
        (lambda d: d.update(schema_version=2), None, "schema_version"),
        (lambda d: d.pop("update_command"), None, "update_command"),
    ],
)
def test_hand_edits_are_reported_with_file_entry_and_field(tmp_path, torch_pins, mutate, entry, field):
    data = copy.deepcopy(torch_pins)
    mutate(data)
    path = write(tmp_path, data)
    with pytest.raises(DataError) as err:
        load_pins(path)
    assert err.value.entry == entry
    assert err.value.field == field
    assert str(path) in str(err.value)


def test_invalid_json_names_line_and_column(tmp_path):
    path = write(tmp_path, '{"schema_version": 1,\n  "packages": ')
    with pytest.raises(DataError, match=r"not valid JSON \(line 2"):
        load_pins(path)


def test_cli_reports_a_malformed_pins_file_of_the_users_with_exit_code_2(tmp_path, torch_pins, capsys):
    """A --file of the user's, outside the project's data, is a bad input (2); the project's own files are 3
    (tests/test_data_registry.py)."""
    data = copy.deepcopy(torch_pins)
    data["packages"]["torch"]["wheels"]["x86_64-linux-312"]["hash"] = "sha256-notbase64"
    path = write(tmp_path, data)
    wheel = tmp_path / "x.whl"
    wheel.write_bytes(b"not a wheel")
    code = main(["pins", "vendor", str(wheel), "--file", str(path)])
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "entry 'packages.torch.wheels.x86_64-linux-312', field 'hash'" in err
    assert "Traceback" not in err
