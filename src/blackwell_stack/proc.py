"""The one place that runs external programs and reports their failures."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from blackwell_stack.errors import BuildError, ToolchainError


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
    """Run argv, capture its output; on failure raise BuildError with its stderr."""
    args = [str(a) for a in argv]
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
    except FileNotFoundError as exc:
        raise ToolchainError(f"{args[0]} is not installed", f"install {args[0]} and try again") from exc
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{' '.join(args)} did not finish within {timeout} s") from exc
    if check and result.returncode != 0:
        err = result.stderr if text else result.stderr.decode(errors="replace")
        tail = "\n".join(err.strip().splitlines()[-20:])
        raise BuildError(f"{' '.join(args)} failed with exit code {result.returncode}:\n{tail}")
    return result
