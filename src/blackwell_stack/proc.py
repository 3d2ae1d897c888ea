"""The one place that runs external programs, shows them (`-v`) and reports their failures.

Every command this project runs goes through `run` (wait for it, capture its
output) or `start` (read its output as it comes, e.g. a long build). With
`blackwell-stack -v` each command is echoed to stderr as `$ command` before
it runs, so a user can repeat it by hand.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
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


def which(program: str) -> str | None:
    return shutil.which(program)


def require(program: str, hint: str) -> str:
    """Path of `program` on PATH, or a ToolchainError that says how to get it."""
    path = shutil.which(program)
    if path is None:
        raise ToolchainError(f"{program} is not on PATH", hint)
    return path


def run(
    argv: Sequence[str | Path],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,
    check: bool = True,
    text: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run argv and capture its output.

    Raises ToolchainError when the program cannot be started, BuildError when
    it runs past `timeout` or (with check) exits non-zero, with the tail of
    its stderr.
    """
    args = [str(a) for a in argv]
    echo(args, cwd)
    try:
        result = subprocess.run(
            args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input,
            capture_output=True,
            text=text,
            timeout=timeout,
        )
    except OSError as exc:
        raise ToolchainError(f"cannot run {args[0]}: {exc.strerror or exc}", f"install {Path(args[0]).name} and try again") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"{shlex.join(args)} did not finish within {timeout:g} s") from None
    if check and result.returncode != 0:
        err = result.stderr if text else result.stderr.decode(errors="replace")
        tail = "\n".join(err.strip().splitlines()[-20:])
        raise BuildError(f"{shlex.join(args)} failed with exit code {result.returncode}:\n{tail}")
    return result


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


def start(
    argv: Sequence[str | Path],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start argv with stdout and stderr merged into one text pipe, read line by line."""
    args = [str(a) for a in argv]
    echo(args, cwd)
    try:
        return subprocess.Popen(
            args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
    except OSError as exc:
        raise ToolchainError(f"cannot start {args[0]}: {exc.strerror or exc}", f"install {Path(args[0]).name}, or pass its path") from None
