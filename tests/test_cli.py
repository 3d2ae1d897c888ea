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
