"""Each command reads each uv.lock once: the stack is resolved where the command starts, its lock parsed once
(and hashed from the same bytes), and both passed down.

The command runs in a subprocess under an audit hook (sys.addaudithook) that counts every `open` of a file
named uv.lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import REPO

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

COUNTING = r"""
import collections, json, os, sys
opened = collections.Counter()

def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if os.path.basename(path) == "uv.lock":
            opened[os.path.relpath(os.path.realpath(path), sys.argv[1])] += 1

sys.addaudithook(hook)
from blackwell_stack.cli import main
try:
    code = main(sys.argv[3:])
finally:
    with open(sys.argv[2], "w") as out:
        json.dump(dict(opened), out)
sys.exit(code)
"""

COMMANDS = [
    ["plan"],
    ["plan", "--json"],
    ["plan", "--stack", "stable", "--json"],
    ["plan", "--stack", "all", "--json"],
    ["pins", "show"],
    ["pins", "show", "--stack", "stable", "--json"],
    ["pins", "show", "--stack", "current"],
    ["plan", "stack-current", "--json"],
    ["serve", "render", "--stack", "current"],
    ["serve", "check", "--stack", "stable", "--json"],
    ["serve", "run", "--stack", "current", "--dry-run"],
    ["serve", "check", "--stack", "stable", "--profile", "qwen3.5-397b-a17b-nvfp4-sm120-current"],
    ["doctor", "--json"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_each_lock_is_read_once(argv, tmp_path):
    counts = tmp_path / "opened.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", COUNTING, str(REPO), str(counts), *argv], capture_output=True,
                            text=True, env=env, timeout=300, cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    opened = json.loads(counts.read_text())
    assert opened, f"{' '.join(argv)} read no uv.lock"
    assert all(n == 1 for n in opened.values()), f"{' '.join(argv)} opened: {opened}"
