"""Programs the CLI runs (proc.py): their output read within a bound, decoded whatever it holds, and never outliving
the call."""

from __future__ import annotations

import sys

import pytest

from blackwell_stack import proc
from blackwell_stack.errors import BuildError, ToolchainError

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

FLOOD = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"


def test_a_program_that_floods_is_stopped_at_the_bound():
    with pytest.raises(ToolchainError, match="printed more than 1 MiB on its stdout"):
        proc.run([sys.executable, "-c", FLOOD], check=False, limit=1 << 20, timeout=600)


def test_a_probe_of_a_flooding_program_is_a_failure_not_a_memory_error():
    code, said = proc.probe([sys.executable, "-c", FLOOD], timeout=600)
    assert code == 127 and said == ""


def test_output_that_is_not_utf8_is_decoded_with_replacements():
    result = proc.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe')"])
    assert result.stdout == "ok \ufffd\ufffd"


def test_input_reaches_the_program_and_a_timeout_stops_it():
    result = proc.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], input="hello")
    assert result.stdout.strip() == "HELLO"
    with pytest.raises(BuildError, match="did not finish within 1 s"):
        proc.run([sys.executable, "-c", "import time; time.sleep(600)"], timeout=1)


def test_a_signal_is_named_by_its_number_too():
    assert proc.signal_name(11) == "SIGSEGV (signal 11)" and proc.signal_name(1000) == "signal 1000"
