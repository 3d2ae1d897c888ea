"""A library the CLI maps (inspect, doctor abi) may be shortened by another program while it reads: that must be
an ordinary read of what it had, never a SIGBUS (formats/wheelzip.py map_file). Run in a child process, so that
a SIGBUS fails the test instead of killing the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

SRC = str(Path(__file__).resolve().parent.parent / "src")

CHILD = """
import sys
from pathlib import Path
from blackwell_stack.formats import wheelzip

path = Path(sys.argv[1])
with wheelzip.map_file(path) as buf:
    with open(path, "r+b") as fh:
        fh.truncate(0)  # another program shortens the file while it is mapped
    data = bytes(buf[:])  # every page read after that
print(len(data), data[:4] == b"\\x7fELF", set(data[4:]) == {7})
"""


def test_a_file_shortened_while_mapped_is_read_not_a_sigbus(tmp_path):
    library = tmp_path / "libshrinks.so"
    library.write_bytes(b"\x7fELF" + b"\x07" * (8 << 20))
    result = subprocess.run([sys.executable, "-c", CHILD, str(library)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": SRC})
    assert result.returncode != -signal.SIGBUS, "SIGBUS: the user's own file was mapped"
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [str(4 + (8 << 20)), "True", "True"]
