"""The CLI's shape: every subcommand group registers, plan --json has its schema."""

import json
import subprocess
import sys

import pytest
from support.cli import run as run_cli

from blackwell_stack.cli import main

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process


def test_help_lists_the_users_commands_apart_from_the_maintainers(capsys):
    """`--help` names each deploying command with its help line, and every other command apart; each one named is
    a command the parser runs."""
    from blackwell_stack.cli import USER_COMMANDS, build_parser, commands

    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    user, maintainer = text.split("commands for deploying:\n", 1)[1].split("\n\nmaintainer commands", 1)
    listed = [line[2:24].strip() for line in user.splitlines() if line[2:3] != " "]
    assert listed == list(USER_COMMANDS)
    assert "plan                  show the whole pinned stack" in user
    every = commands(build_parser())
    assert set(USER_COMMANDS) <= set(every)
    rest = maintainer.split("\n\nexit codes:", 1)[0].split(":", 1)[1]
    assert " ".join(rest.split()).split(", ") == [name for name in every if name not in USER_COMMANDS]
    assert {"stack lock", "pins show", "kernel reference", "kernel patches check", "wheel diff"} <= set(every)


def test_plan_json_schema():
    result = run_cli("plan", "--json", "--stack", "all")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["plan_version"] == 1
    assert "SM120" in plan["target"]
    assert list(plan["sections"]) == ["pins", "stack-stable", "stack-current", "stack-nightly", "kernel",
                                      "service-stable", "service-current", "service-nightly",
                                      "doctor-stable", "doctor-current", "doctor-nightly", "verify"]
    # The source build is shown only where a stack builds its kernel; doctor follows each stack's lock.
    current = json.loads(run_cli("plan", "--json", "--stack", "current").stdout)
    assert list(current["sections"]) == ["pins", "stack-current", "service", "doctor", "verify"]
    doctor = {i["name"]: i for i in current["sections"]["doctor"]["items"]}
    assert doctor["torch"]["value"].startswith("2.14.1") and "sglang-kernel ABI" in doctor
    for section in plan["sections"].values():
        assert set(section) == {"title", "items", "commands"}
        for item in section["items"]:
            assert set(item) == {"name", "value", "source", "verified", "note", "checked_by", "detail", "needs"}
            assert isinstance(item["verified"], bool)
            if not item["verified"]:
                assert item["note"], f"unverified item {item['name']} must say why and how to fill it"
    flagged = {(u["section"], u["name"]) for u in plan["unverified"]}
    expected = {(k, i["name"]) for k, s in plan["sections"].items() for i in s["items"] if not i["verified"]}
    assert flagged == expected
    assert ("stack-nightly", "uv.lock") in flagged


def test_plan_says_what_was_not_checked_here():
    plan = json.loads(run_cli("plan", "--json").stdout)
    items = {(k, i["name"]): i for k, s in plan["sections"].items() for i in s["items"]}
    # The eight GPUs and their driver are never checked on the machine that runs `plan`.
    for name in ("GPUs", "compute capability", "NVIDIA driver", "interconnect"):
        assert items[("doctor", name)]["checked_by"].startswith("not checked here"), name
        assert items[("doctor", name)]["needs"] == "gpu-host", name  # typed: nothing reads the wording
    # A pin whose own source says its hash was not computed here is not shown as checked.
    nixpkgs = items[("pins", "flake input nixpkgs")]
    assert "not computed by this project" in nixpkgs["source"] and nixpkgs["checked_by"].startswith("not checked here")
    # Locked files: PyPI's own digest, and the file hashed by `stack audit`.
    assert items[("stack-stable", "sglang")]["checked_by"] == "PyPI's sha256, file hashed by `stack audit`"
    assert items[("stack-stable", "sglang 0.5.9")]["detail"] is True
    # The reported throughput figures are not measured here.
    assert all(i["checked_by"].startswith("not checked here") for (k, n), i in items.items() if n.startswith("baseline:"))
    text = run_cli("plan", "--wide").stdout
    gpus = next(line for line in text.splitlines() if line.startswith("GPUs "))
    assert gpus.rstrip().endswith("not checked here (`doctor` on the GPU host)")


def test_plan_wide_prints_every_section():
    result = run_cli("plan", "--wide")
    assert result.returncode == 0, result.stderr
    for title in ("Pinned inputs", "Host checks (doctor) for stack stable", "Serving verification", "Unverified (1)"):
        assert f"== {title} ==" in result.stdout


def test_stack_error_is_a_message_not_a_traceback(tmp_path):
    result = run_cli("pins", "vendor", str(tmp_path / "missing.whl"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
    assert main(["pins", "show"]) == 0


def test_kernel_sources_update_is_wired_and_names_known_pins():
    result = run_cli("pins", "update", "kernel-sources", "--only", "no-such-pin")
    assert result.returncode == 2
    assert "no such pin" in result.stderr and "fetchcontent.repo-cutlass" in result.stderr


def test_plan_reports_a_profile_it_cannot_read_instead_of_failing(tmp_path):
    import os

    from conftest import copy_data_root

    root = copy_data_root(tmp_path / "root")
    profile = root / "modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json"
    data = json.loads(profile.read_text())
    data["service"]["port"] = "abc"
    profile.write_text(json.dumps(data))
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "plan", "--json"], capture_output=True, text=True,
                            env={**os.environ, "BLACKWELL_STACK_ROOT": str(root)})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    flagged = {(u["section"], u["name"]): u["note"] for u in json.loads(result.stdout)["unverified"]}
    assert "serving profile cannot be read" in flagged[("verify", "endpoint")]
