"""Is SGLang installed for an interpreter? Asked before `serve run` or `bench` starts it with SGLang's modules."""

from __future__ import annotations

import sys

from blackwell_stack import proc
from blackwell_stack.errors import BuildError, ToolchainError

# Prints the version of the sglang the interpreter would import, or nothing (without importing it: that takes long).
_SGLANG_PROBE = (
    "import importlib.metadata as m, importlib.util as u\n"
    "if u.find_spec('sglang'):\n"
    "    try:\n        print(m.version('sglang'))\n"
    "    except m.PackageNotFoundError:\n        print('unknown')\n"
)
SGLANG_HINT = ("pass --python with the interpreter of the venv that serves the model (the README's `uv sync` makes "
               ".venv/bin/python), or install the stack's lock into this one")


def check_sglang(python: str, rendered_for: str | None, module: str = "sglang.launch_server") -> None:
    """Refuse an interpreter that has no sglang before running `module` with it (it would end in "No module named
    'sglang'"); warn when its sglang is not the version the flags were checked against (rendered_for)."""
    try:
        result = proc.run([python, "-c", _SGLANG_PROBE], check=False, timeout=120)
    except (ToolchainError, BuildError) as exc:
        raise ToolchainError(f"cannot run --python {python}: {exc.message}", SGLANG_HINT) from None
    found = result.stdout.strip().splitlines()[-1:] if result.returncode == 0 else []
    if not found:
        raise ToolchainError(f"{python} has no sglang (`python -m {module}` would fail with "
                             "\"No module named 'sglang'\")", SGLANG_HINT)
    if rendered_for is not None and found[0] != rendered_for:
        print(f"warning: {python} has sglang {found[0]}, but the flags were checked against sglang {rendered_for}'s "
              "parser (pass --stack NAME for the stack this venv holds)", file=sys.stderr)
