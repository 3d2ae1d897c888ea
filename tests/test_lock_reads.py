"""Each command reads each uv.lock once: the stack is resolved where the command starts, its lock parsed once
(and hashed from the same bytes), and both passed down.

The commands run one after another in one subprocess under an audit hook (sys.addaudithook) that counts every
`open` of a file named uv.lock, command by command (a hook cannot be removed, so not in the test's own process).
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
import collections, contextlib, io, json, os, sys
opened = collections.Counter()

def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if os.path.basename(path) == "uv.lock":
            opened[os.path.relpath(os.path.realpath(path), sys.argv[1])] += 1

sys.addaudithook(hook)
from blackwell_stack.cli import main
found = {}
for argv in json.loads(sys.argv[3]):
    opened.clear()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(argv)
    found[" ".join(argv)] = {"code": code, "opened": dict(opened), "traceback": "Traceback" in err.getvalue()}
with open(sys.argv[2], "w") as out:
    json.dump(found, out)
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


def test_each_lock_is_read_once(tmp_path):
    counts = tmp_path / "opened.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", COUNTING, str(REPO), str(counts), json.dumps(COMMANDS)],
                            capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    found = json.loads(counts.read_text())
    assert list(found) == [" ".join(argv) for argv in COMMANDS]
    for command, seen in found.items():
        assert not seen["traceback"], command
        assert seen["opened"], f"{command} read no uv.lock"
        assert all(n == 1 for n in seen["opened"].values()), f"{command} opened: {seen['opened']}"
