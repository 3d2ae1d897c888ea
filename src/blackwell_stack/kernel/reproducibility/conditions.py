"""The conditions of a kernel build that its build record does not name but its bytes depend on: the stage it
compiles from, the compilers (version, path and the libstdc++ they link) and the versions of the other tools.
The reference wheel records them (kernel/reproducibility/reference.py); `kernel build` shows this build's beside them."""

from __future__ import annotations

import re
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.kernel.build import compilers as compilers_mod
from blackwell_stack.kernel.build import toolchain

# The conditions, in the order they are shown. The stage first: its path changes the bytes for certain. The
# checkout, the sources directory and the venv are not conditions: the build stages the first two at the fixed
# stage and prefix-maps torch's headers (docs/sgl-kernel.md).
CONDITIONS = ("stage", "c", "c++", "cuda host c++", "nvcc", "binutils", "cmake", "ninja", "scikit-build-core",
              "torch")


def conditions_of(*, stage: Path, checks: list[toolchain.Check],
                  compilers: list[compilers_mod.Compiler]) -> dict[str, str | None]:
    """This build's conditions, as the reference names them (None: not found)."""
    found = {c.name: c.value for c in checks} | {c.role.name: c.describe() for c in compilers if c.path}
    code, text = proc.probe(["ld", "--version"], timeout=60)
    binutils = re.search(r"^GNU ld .*?(\d+\.\d+(?:\.\d+)?)\s*$", text, re.MULTILINE) if code == 0 else None
    found.update(stage=str(stage), binutils=binutils.group(1) if binutils else None)
    return {name: found.get(name) for name in CONDITIONS}
