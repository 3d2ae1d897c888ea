"""stacks: the serving stacks, `stacks/<name>/` (pyproject.toml, uv.lock, stack.json, wheels.json).

One lock, two realizations: uv2nix builds the lock in Nix and `uv sync --frozen` installs it into a venv
(docs/stacks.md). The stack and its lock themselves are data/.

Other areas may use the modules in __all__ (the test of the import graph holds them to it).
"""

__all__ = ["doctor", "libraries", "plan"]
