"""Written files: their modes, outputs that cannot be written (refused before any work), an unusable cache."""

from __future__ import annotations

import os
import stat

import pytest

from blackwell_stack import fileio, paths
from blackwell_stack.cli import main
from blackwell_stack.errors import ExitCode, StackError

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_a_new_file_gets_the_umask(tmp_path, umask_027):
    fileio.atomic_write_json(tmp_path / "new.json", {"a": 1})
    assert mode(tmp_path / "new.json") == 0o640
    assert fileio.current_umask() == 0o027


def test_a_rewritten_file_keeps_its_mode(tmp_path):
    target = tmp_path / "data.json"
    target.write_text("{}")
    for wanted in (0o644, 0o600, 0o664):
        os.chmod(target, wanted)
        fileio.atomic_write_bytes(target, b"{}\n")
        assert mode(target) == wanted


def test_nothing_is_left_behind_when_a_write_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with fileio.atomic_file(tmp_path / "out.bin") as fh:
            fh.write(b"half")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make", ["directory", "under-a-file", "deep-under-a-file"])
def test_check_output_path_refuses_what_cannot_be_written(tmp_path, make):
    (tmp_path / "file").write_text("x")
    target = {
        "directory": tmp_path,
        "under-a-file": tmp_path / "file" / "out.json",
        "deep-under-a-file": tmp_path / "file" / "a" / "b" / "out.json",
    }[make]
    with pytest.raises(StackError) as err:
        fileio.check_output_path(target, "--out")
    assert "--out" in str(err.value) and err.value.hint


def test_check_output_path_accepts_new_directories(tmp_path):
    assert fileio.check_output_path(tmp_path / "new" / "dir" / "out.json", "--out")
    assert not (tmp_path / "new").exists()  # the probe leaves nothing behind
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_directory_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a 0500 directory is writable, so there is nothing to refuse")
        with pytest.raises(StackError, match="cannot write in"):
            fileio.check_output_path(ro / "out.json", "--out")
    finally:
        os.chmod(ro, 0o700)


@pytest.mark.parametrize("option", ["--out", "--plot"])
def test_bench_refuses_an_unwritable_output_before_the_sweep(tmp_path, capsys, option):
    (tmp_path / "file").write_text("x")
    # The server is unreachable: had bench started, it would fail on the model listing (exit 1).
    code = main(["bench", UNREACHABLE, "--timeout", "2", option, str(tmp_path / "file" / "result")])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert option in err and "not a directory" in err and "cannot list models" not in err
    code = main(["bench", UNREACHABLE, "--timeout", "2", option, str(tmp_path)])
    assert code == ExitCode.USAGE and "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["regular-file", "under-a-file"])
def test_an_unusable_cache_is_a_clear_error(tmp_path, monkeypatch, kind):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    cache = blocker if kind == "regular-file" else blocker / "cache"
    monkeypatch.setenv("BLACKWELL_STACK_CACHE", str(cache))
    with pytest.raises(StackError) as err:
        paths.cache_dir("pypi")
    assert "BLACKWELL_STACK_CACHE" in err.value.hint


def _special_files(tmp_path) -> list:
    """A FIFO, and (as root) a character device node of our own, with the numbers of /dev/null: the kinds of
    destination a rename would replace for every program on the host."""
    made = [tmp_path / "fifo"]
    os.mkfifo(made[0])
    if os.geteuid() == 0:
        try:
            os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
            made.append(tmp_path / "null")
        except PermissionError:  # a container without CAP_MKNOD: the FIFO stands for the class alone
            pass
    return made


def test_an_atomic_write_never_replaces_what_is_not_a_regular_file(tmp_path):
    for special in _special_files(tmp_path):
        kind = stat.S_IFMT(os.lstat(special).st_mode)
        with pytest.raises(StackError, match="not a regular file: it is not replaced"):
            fileio.atomic_write_bytes(special, b"x")
        assert stat.S_IFMT(os.lstat(special).st_mode) == kind
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left beside them


@pytest.mark.parametrize("argv", [
    ["bench", UNREACHABLE, "--timeout", "2", "--out", "{special}"],
    ["bench", UNREACHABLE, "--timeout", "2", "--plot", "{special}"],
], ids=lambda argv: " ".join(argv[:2]))
def test_every_file_output_refuses_a_special_destination_first(tmp_path, capsys, argv):
    for special in _special_files(tmp_path):
        kind = stat.S_IFMT(os.lstat(special).st_mode)
        code = main([a.format(special=special, tmp=tmp_path) for a in argv])
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE and "not a regular file: it is not replaced" in err, err
        assert stat.S_IFMT(os.lstat(special).st_mode) == kind
        special.unlink()
