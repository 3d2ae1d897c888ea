"""The one place that runs external programs, shows them (`-v`) and reports their failures.

Every command this project runs goes through `run` (wait for it, capture its
output) or `start` (read its output as it comes, e.g. a long build). With
`blackwell-stack -v` each command is echoed to stderr as `$ command` before
it runs, so a user can repeat it by hand.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from blackwell_stack.errors import BuildError, ToolchainError

_verbose = False


def set_verbose(on: bool) -> None:
    """Echo every command before it runs (the CLI's -v)."""
    global _verbose
    _verbose = on


def echo(args: Sequence[str], cwd: str | Path | None = None) -> None:
    if _verbose:
        where = f"(in {cwd}) " if cwd else ""
        print(f"$ {where}{shlex.join(args)}", file=sys.stderr, flush=True)


def require(program: str, hint: str) -> str:
    """Path of `program` on PATH, or a ToolchainError that says how to get it."""
    path = shutil.which(program)
    if path is None:
        raise ToolchainError(f"{program} is not on PATH", hint)
    return path


# The most any program this project runs prints on one stream and is read: far above what each needs (uv's
# resolver errors, a compiler's messages, a Python probe's one line); a program that floods past it is stopped.
OUTPUT_LIMIT = 64 << 20


def run(argv: Sequence[str | Path], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
        input: str | None = None, check: bool = True, timeout: float | None = None,
        limit: int = OUTPUT_LIMIT) -> subprocess.CompletedProcess:
    """Run argv and capture its output, at most `limit` bytes of each stream.

    Raises ToolchainError when the program cannot be started or prints more than `limit` (it is then
    stopped), BuildError when it runs past `timeout` or (with check) exits non-zero, with the tail of its
    stderr. Text is decoded as UTF-8, undecodable bytes replaced. Interrupted, it stops the program too.
    """
    args = [str(a) for a in argv]
    echo(args, cwd)
    try:
        child = subprocess.Popen(args, cwd=cwd, env=dict(env) if env is not None else None,
                                 stdin=subprocess.PIPE if input is not None else None,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise ToolchainError(f"cannot run {args[0]}: {exc.strerror or exc}", f"install {Path(args[0]).name} and try again") from None
    streams = {"stdout": _Capture(child, child.stdout, limit), "stderr": _Capture(child, child.stderr, limit)}
    try:
        if input is not None and child.stdin is not None:
            # A child that exits without reading all of it: its exit code says what happened.
            with contextlib.suppress(BrokenPipeError):
                child.stdin.write(input.encode())
                child.stdin.close()
        returncode = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{shlex.join(args)} did not finish within {timeout:g} s") from None
    finally:
        if child.poll() is None:  # timed out, interrupted, or an error above: it does not outlive this call
            child.kill()
            child.wait()
        for capture in streams.values():
            capture.join()
    for name, capture in streams.items():
        if capture.overflowed:
            raise ToolchainError(f"{args[0]} printed more than {limit >> 20} MiB on its {name}, far more than "
                                 "this needs: it was stopped",
                                 "check that it is the program meant (a --python, or a PATH entry, that is something else)")
    out, err = (c.data.decode(errors="replace") for c in streams.values())
    if check and returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-20:])
        raise BuildError(f"{shlex.join(args)} failed with exit code {returncode}:\n{tail}")
    return subprocess.CompletedProcess(args, returncode, out, err)


class _Capture:
    """One output stream of a child, read in a thread: its first `limit` bytes; past them, the child is killed."""

    def __init__(self, child: subprocess.Popen, stream, limit: int):
        self.data = bytearray()
        self.overflowed = False
        self._thread = threading.Thread(target=self._read, args=(child, stream, limit), daemon=True)
        self._thread.start()

    def _read(self, child: subprocess.Popen, stream, limit: int) -> None:
        with stream:
            while block := stream.read1(1 << 16):
                if len(self.data) + len(block) > limit:
                    self.overflowed = True
                    child.kill()
                    return
                self.data += block

    def join(self) -> None:
        # A grandchild that kept the pipe open would hold the reader: it is a daemon, left after a bound.
        self._thread.join(timeout=30)


def probe(argv: Sequence[str | Path], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
          timeout: float = 120, stdout_only: bool = False) -> tuple[int, str]:
    """Ask a tool something (`--version`, a one-line script): its exit code and what it printed, stripped.

    127 when it cannot be started, 124 when it runs past `timeout`, as a shell says. With `stdout_only` a
    successful answer is its stdout alone (a tool may warn on stderr: never the answer)."""
    try:
        result = run(argv, check=False, timeout=timeout, cwd=cwd, env=env)
    except ToolchainError:
        return 127, ""
    except BuildError:
        return 124, ""
    if stdout_only and result.returncode == 0:
        return result.returncode, result.stdout.strip()
    return result.returncode, (result.stdout + result.stderr).strip()


def start(argv: Sequence[str | Path], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
          new_session: bool = False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) -> subprocess.Popen[str]:
    """Start argv; its output in text (undecodable bytes replaced), by default stdout and stderr merged into one
    pipe, read line by line. With `new_session`, without stdin in a session (and process group) of its own, so that
    all it starts ends with it (stop_group)."""
    args = [str(a) for a in argv]
    echo(args, cwd)
    try:
        return subprocess.Popen(args, cwd=cwd, env=dict(env) if env is not None else None, stdout=stdout,
                                stderr=stderr, stdin=subprocess.DEVNULL if new_session else None, text=True,
                                errors="replace", bufsize=1, start_new_session=new_session)
    except OSError as exc:
        raise ToolchainError(f"cannot start {args[0]}: {exc.strerror or exc}", f"install {Path(args[0]).name}, or pass its path") from None


def stop_group(child: subprocess.Popen, grace: float = 0.0) -> None:
    """End `child` and every process of its group: SIGTERM first when it has `grace` seconds to exit, then SIGKILL.
    What the leader left running in its group goes too."""
    for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)) if grace else ((signal.SIGKILL, 30.0),):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=wait)


def wait_group(child: subprocess.Popen, timeout: float, grace: float = 0.0) -> int | None:
    """The exit code of `child` (started with new_session), None when it runs past `timeout`; whatever happens
    (an interrupt too), its group is ended after it (stop_group)."""
    try:
        return child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        stop_group(child, grace)


def run_group(argv: Sequence[str | Path], timeout: float, on_line: Callable[[str], None], *,
              env: Mapping[str, str] | None = None, grace: float = 0.0, stdout: bool = False) -> tuple[int | None, str]:
    """Run argv in a session of its own for at most `timeout` seconds (wait_group): its exit code and, with
    `stdout`, its stdout apart (at most OUTPUT_LIMIT); each line of its other output goes to on_line as it comes."""
    child = start(argv, env=env, new_session=True, stderr=subprocess.PIPE if stdout else subprocess.STDOUT)
    pipe, out = child.stdout, []
    assert pipe is not None
    readers = [threading.Thread(target=_each_line, args=(child.stderr if stdout else pipe, on_line), daemon=True)]
    if stdout:
        readers.append(threading.Thread(target=lambda: out.append(pipe.read(OUTPUT_LIMIT)), daemon=True))
    for reader in readers:
        reader.start()
    code = wait_group(child, timeout, grace)
    for reader in readers:
        reader.join(timeout=30)  # a grandchild in a session of its own may hold the pipe: the reader is a daemon
    return code, "".join(out)


def _each_line(stream, on_line: Callable[[str], None]) -> None:
    while line := stream.readline(4096):
        on_line(line.rstrip("\n"))


def log_tail(path: str | Path, lines: int, limit: int = 64 << 10) -> list[str]:
    """The last `lines` lines of a program's log, read from its last `limit` bytes only."""
    with open(path, "rb") as fh:
        fh.seek(max(0, os.fstat(fh.fileno()).st_size - limit))
        return fh.read().decode(errors="replace").splitlines()[-lines:]


def signal_name(number: int) -> str:
    """SIGSEGV (signal 11), for a process that died of signal `number`."""
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"
