"""The phases of a stdenv build, run outside Nix on an evaluated derivation's attributes.

- `unpack` and `apply_patches`: stdenv's unpackPhase (a directory source is
  copied to `source/` and made writable) and patchPhase (`patch ${patchFlags:--p1} < each`).
- `hook`: a setup hook's script (pyproject.nix's configure and build hooks,
  read from the locked pyproject.nix) with its @substitutions@ made, as
  makeSetupHook makes them.
- `cc_wrapper`: what nixpkgs' compiler and linker wrappers add to every call:
  the NIX_CFLAGS_COMPILE of the build's inputs (`-isystem <input>/include`)
  before the caller's arguments, and NIX_LDFLAGS (`-L<input>/lib`, which the
  linker wrapper gives ld) after them. A bin/ of cc, c++, gcc and g++ that
  call the host's compiler so.
- `run_script`: a bash build script with stdenv's `runHook` for string hooks
  (preBuild and friends are strings in these derivations), in a clean
  environment.
"""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import StackError

RUN_HOOK = 'runHook() { local hook="$1"; if [[ -n "${!hook-}" ]]; then eval "${!hook}"; fi; }\n'


def unpack(src: Path, top: Path) -> Path:
    """stdenv's unpackPhase for a directory source: a writable copy at $NIX_BUILD_TOP/source."""
    dest = top / "source"
    shutil.copytree(src, dest, symlinks=True)
    for path in [dest, *dest.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return dest


def apply_patches(source_root: Path, patches: Sequence[str | Path], flags: Sequence[str] = ("-p1",)) -> None:
    """stdenv's patchPhase: each patch, in order, with `patch ${patchFlags:--p1}`."""
    for patch in patches:
        result = proc.run(["patch", *flags, "--batch", "-i", str(patch)], cwd=source_root, check=False, timeout=120)
        if result.returncode != 0:
            raise StackError(f"{Path(patch).name} does not apply to {source_root}:\n{result.stdout[-1500:]}")


def hook(path: Path, substitutions: Mapping[str, str]) -> str:
    """A setup hook's text with @name@ replaced; a placeholder left unreplaced is an error."""
    text = path.read_text()
    for name, value in substitutions.items():
        text = text.replace(f"@{name}@", value)
    left = sorted(set(re.findall(r"@([A-Za-z_][A-Za-z0-9_]*)@", text)))
    if left:
        raise StackError(f"{path}: no value for {', '.join('@' + n + '@' for n in left)}",
                         "the locked pyproject.nix's hook changed: give the rehearsal its new substitutions")
    return text


def cc_wrapper(directory: Path, real_bin: Path = Path("/usr/bin")) -> Path:
    """bin/{cc,c++,gcc,g++} adding $NIX_CFLAGS_COMPILE before the arguments and $NIX_LDFLAGS after them."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("cc", "c++", "gcc", "g++"):
        script = bin_dir / name
        script.write_text(f'#!/bin/bash\nexec {real_bin / name} ${{NIX_CFLAGS_COMPILE-}} "$@" ${{NIX_LDFLAGS-}}\n')
        script.chmod(0o755)
    return bin_dir


def run_script(script: str, *, cwd: Path, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess:
    """bash -eu -o pipefail running script after stdenv's runHook, in exactly env; the result, not checked."""
    return proc.run(["bash", "-eu", "-o", "pipefail", "-c", RUN_HOOK + script], cwd=cwd, env=env, check=False,
                    timeout=timeout)
