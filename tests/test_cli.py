"""The CLI's shape: every subcommand group registers, plan --json has its schema."""

import json
import subprocess
import sys

from blackwell_stack.cli import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "blackwell_stack", *args], capture_output=True, text=True)


def test_help_lists_main_job():
    result = run_cli("--help")
    assert result.returncode == 0
    assert "plan" in result.stdout


def test_unknown_command_is_usage_error():
    result = run_cli("no-such-command")
    assert result.returncode == 2


def test_plan_json_schema():
    result = run_cli("plan", "--json", "--stack", "all")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["plan_version"] == 1
    assert "SM120" in plan["target"]
    assert list(plan["sections"]) == ["pins", "stack-current", "stack-nightly", "stack-stable", "kernel",
                                      "service-current", "service-nightly", "service-stable", "doctor", "verify"]
    for section in plan["sections"].values():
        assert set(section) == {"title", "items", "commands"}
        for item in section["items"]:
            assert set(item) == {"name", "value", "source", "verified", "note"}
            assert isinstance(item["verified"], bool)
            if not item["verified"]:
                assert item["note"], f"unverified item {item['name']} must say why and how to fill it"
    flagged = {(u["section"], u["name"]) for u in plan["unverified"]}
    expected = {(k, i["name"]) for k, s in plan["sections"].items() for i in s["items"] if not i["verified"]}
    assert flagged == expected
    assert ("stack-nightly", "torch (x86_64-linux-312)") in flagged and ("stack-nightly", "uv.lock") in flagged


def test_plan_prints_every_section():
    result = run_cli("plan")
    assert result.returncode == 0, result.stderr
    for title in ("Pinned inputs", "Unverified"):
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
