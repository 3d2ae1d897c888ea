"""What every command shares: exit codes by kind, a closed stdout pipe, -v, tables that fit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.cli import run as cli

from blackwell_stack import output
from blackwell_stack.cli import main
from blackwell_stack.errors import ExitCode

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
# A command that fails a check (exit 1) after printing a table: an FP8 KV cache is refused by the rules.
FAILING = ["serve", "check", "--set", "kv-cache-dtype=fp8_e4m3"]


def closed_pipe_run(*argv: str) -> subprocess.CompletedProcess:
    """Run the CLI with stdout on a real pipe whose reading end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return cli(*argv, stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)


def test_help_documents_every_exit_code(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for code in ExitCode:
        assert f"\n  {int(code)} " in out


@pytest.mark.proc
def test_a_failing_command_keeps_its_exit_code_on_a_closed_pipe():
    assert cli(*FAILING, capture_output=True).returncode == ExitCode.CHECK_FAILED
    result = closed_pipe_run(*FAILING)
    assert result.returncode == ExitCode.CHECK_FAILED
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


@pytest.mark.proc
def test_a_passing_command_on_a_closed_pipe_exits_0_quietly():
    result = closed_pipe_run("plan")
    assert result.returncode == 0
    assert result.stderr == ""


@pytest.mark.proc
def test_a_reader_that_stops_early_does_not_change_the_code():
    env = {**os.environ, "PYTHONPATH": SRC}
    child = subprocess.Popen([sys.executable, "-m", "blackwell_stack", *FAILING], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.readline()
    child.stdout.close()  # like `| head -1`
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == ExitCode.CHECK_FAILED
    assert "Traceback" not in err


@pytest.mark.proc
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full (every write: ENOSPC)")
def test_a_full_disk_under_stdout_fails_the_command_with_a_message():
    """Only EPIPE means the reader has gone; a write that fails for another reason lost output someone waits for."""
    with open("/dev/full", "w") as full:
        result = cli("plan", stdout=full, stderr=subprocess.PIPE, text=True)
    assert result.returncode == ExitCode.USAGE
    assert "the output could not be written (No space left on device)" in result.stderr
    assert "Traceback" not in result.stderr



def test_a_nonblocking_stdout_that_would_block_gets_all_of_it(monkeypatch):
    """EAGAIN is neither a reader that has gone nor lost output: the guard waits for room and writes the rest.
    The pipe is full before the write starts; its reader starts only once the guard waits (the real select,
    watched), so the wait is taken whatever the machine's speed."""
    import threading

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    filled = 0
    while True:
        try:
            filled += os.write(write_fd, b"x" * 4096)
        except BlockingIOError:
            break
    received = bytearray()
    reader = threading.Thread(target=lambda: received.extend(_read_all(read_fd)))
    real_select, waits = output.select.select, []

    def watched_select(*args):
        if not waits:
            reader.start()
        waits.append(args)
        return real_select(*args)

    monkeypatch.setattr(output.select, "select", watched_select)
    text = "ünïcode line\n" * 20_000
    with open(write_fd, "w", encoding="utf-8", closefd=True) as stream:
        guard = output._PipeGuard(stream)
        guard.write(text)
        guard.flush()
        assert guard.failure is None and not guard.broken
    reader.join(timeout=120)
    assert waits, "the pipe never filled: the EAGAIN path was not taken"
    assert bytes(received) == b"x" * filled + text.encode()


def _read_all(fd: int) -> bytes:
    with open(fd, "rb") as fh:
        return fh.read()

def test_usage_errors_are_code_2_without_a_traceback(capsys):
    assert main(["no-such-command"]) == ExitCode.USAGE
    assert main(["serve", "check", "--profile", "no-such-profile"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "no such profile" in err and "hint:" in err and "Traceback" not in err


@pytest.mark.proc
def test_verbose_echoes_the_commands_it_runs(tmp_path, capsys):
    python = sys.executable
    assert main(["-v", "doctor", "--python", python, "--json"]) in (0, 1)
    err = capsys.readouterr().err
    assert f"$ {python} -c " in err
    assert main(["doctor", "--python", python, "--json"]) in (0, 1)
    assert "$ " not in capsys.readouterr().err


def _plan_lines(columns: str, *extra: str) -> list[str]:
    result = cli("plan", *extra, capture_output=True, text=True, env={**os.environ, "COLUMNS": columns})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.proc
def test_plan_fits_the_terminal_and_wide_prints_rows_whole():
    for columns in ("80", "120"):
        for extra in ((), ("pins",), ("doctor",), ("stack",), ("unverified",)):
            lines = _plan_lines(columns, *extra)
            assert max(len(line) for line in lines if not line.startswith("  $ ")) <= int(columns), extra
    wide = _plan_lines("80", "--wide")
    assert max(len(line) for line in wide) > 120
    # A section is listed item by item, nothing cut: more lines than the same rows printed whole.
    section, whole = _plan_lines("80", "kernel"), _plan_lines("80", "kernel", "--wide")
    assert not any("…" in line for line in section) and len(section) > len(whole)


def test_table_wraps_cells_instead_of_cutting_them(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    long = "word " * 30
    output.table(["name", "text"], [["a", long.strip()]])
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 40
    assert " ".join(line[6:].strip() for line in lines[2:]).split() == long.split()


def test_fit_widths_keeps_narrow_columns_and_shares_the_rest():
    assert output.fit_widths([4, 10, 200], 80, [0, 0, 0]) == [4, 10, 62]
    assert output.fit_widths([4, 10, 20], 80, [0, 0, 0]) == [4, 10, 20]
    widths = output.fit_widths([30, 100, 100, 8], 100, [0, 0, 0, 0])
    assert sum(widths) + 2 * 3 <= 100 and widths[3] == 8


@pytest.mark.parametrize("argv", [
    ["inspect", "x.whl", "--jobs", "0"],
    ["bench", "http://127.0.0.1:1", "--timeout", "-1"],
    ["bench", "http://127.0.0.1:1", "--timeout", "0"],
    ["bench", "http://127.0.0.1:1", "--warmup", "-1"],
    ["smoke", "http://127.0.0.1:1", "--timeout", "0"],
    ["stack", "audit", "stable", "--jobs", "0"],
    ["kernel", "build", "--src", "x", "--dry-run", "--jobs", "0"],
    ["kernel", "build", "--src", "x", "--dry-run", "--job-peak-mib", "-5"],
    ["kernel", "build", "--src", "x", "--dry-run", "--memory-gib", "nan"],
    ["kernel", "build", "--src", "x", "--dry-run", "--memory-gib", "-1"],
])
def test_impossible_numbers_are_refused_by_the_parser(argv, capsys):
    assert main(argv) == ExitCode.USAGE
    assert "Traceback" not in capsys.readouterr().err


def test_serve_run_dry_run_json_prints_json(capsys):
    assert main(["serve", "run", "--dry-run", "--json", "--python", "python3.12"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["argv"][:3] == ["python3.12", "-m", "sglang.launch_server"]
    assert "--kv-cache-dtype" in data["argv"] and data["command"].startswith(next(iter(data["env"])))


@pytest.mark.proc
@pytest.mark.parametrize("argv", [["plan", "kernel"], ["serve", "render"], ["serve", "check"], ["pins", "show"]])
def test_tables_and_prose_fit_80_columns(argv):
    result = cli(*argv, capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    assert result.returncode in (0, 1), result.stderr
    # Commands are printed whole, to be copied: the launch command and `$ ...` lines.
    lines = [line for line in result.stdout.splitlines() if "sglang.launch_server" not in line and not line.startswith("  $ ")]
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80][:3]


@pytest.mark.proc
def test_what_a_server_names_reaches_the_terminal_as_text_not_control_sequences():
    """A model id with ESC sequences (clear the screen, set the title) is printed escaped, as is a user's argument."""
    from support.verify_server import ESCAPE_MODEL, FaultServer

    server = FaultServer("escape-model")
    try:
        result = cli("smoke", server.url, "--timeout", "30", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        server.stop()
    said = result.stdout + result.stderr
    assert result.returncode == ExitCode.OK, said[-2000:]
    assert ESCAPE_MODEL.translate(output._CONTROLS) in said
    assert "\x1b" not in said and "\x07" not in said
    result = cli("plan", "--stack", "no\x1b[2Jstack", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert result.returncode == ExitCode.USAGE and "\x1b" not in result.stdout + result.stderr
