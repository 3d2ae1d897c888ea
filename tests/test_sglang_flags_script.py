"""scripts/sglang-flags/flags_extract.py refuses bad input as the CLI does: a clear error and its exit code,
nothing written (the tables it makes: tests/test_serve_flags.py)."""

from __future__ import annotations

import os
import zipfile

import pytest
from support import scripts

from blackwell_stack.errors import ExitCode

flags_extract = scripts.load("scripts/sglang-flags/flags_extract.py")


def test_an_unwritable_output_is_refused_before_the_wheel_is_read(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code = flags_extract.main(["--wheel", str(tmp_path / "missing.whl"), "--output", str(tmp_path / "file" / "t.json")])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and "--output" in err and "Traceback" not in err


def test_a_fifo_as_output_is_not_replaced(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert flags_extract.main(["--wheel", str(tmp_path / "missing.whl"), "--output", str(fifo)]) == ExitCode.USAGE
    assert "not a regular file: it is not replaced" in capsys.readouterr().err and fifo.is_fifo()


def test_without_output_it_goes_on_to_the_wheel(tmp_path, repo, capsys):
    """Without --output the table goes beside the others, named by the wheel's version: that path is checked, and
    the script goes on to the wheel (here: missing)."""
    code = flags_extract.main(["--wheel", str(tmp_path / "sglang-0.5.99-py3-none-any.whl")])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and "no such file" in err and "not a version" not in err, err
    assert not (repo / "modules" / "sglang-flags" / "0.5.99.json").exists()


def test_a_fifo_as_wheel_is_refused(tmp_path, capsys):
    fifo = tmp_path / "sglang-0.5.9-py3-none-any.whl"
    os.mkfifo(fifo)
    assert flags_extract.main(["--wheel", str(fifo), "--output", str(tmp_path / "t.json")]) == ExitCode.USAGE
    assert "is a FIFO (named pipe)" in capsys.readouterr().err


@pytest.mark.proc  # the parser probe is a child process
def test_a_member_is_read_within_a_bound(tmp_path, capsys):
    """65 MiB of server_args.py in a wheel of 65 KiB."""
    bomb = tmp_path / "sglang-0.5.9-py3-none-any.whl"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sglang/srt/server_args.py", b"#" * (65 << 20))
    assert flags_extract.main(["--wheel", str(bomb), "--output", str(tmp_path / "t.json")]) == ExitCode.USAGE
    assert "member sglang/srt/server_args.py inflates to more than 64 MiB" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()
