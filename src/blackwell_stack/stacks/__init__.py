"""stacks: the serving stacks, `stacks/<name>/` (pyproject.toml, uv.lock, stack.json, wheels.json).

One lock, two realizations: uv2nix builds the lock in Nix (lib/stacks.nix,
nix/stack-set.nix) and `uv sync --frozen` installs it into a venv. The stack
and its lock themselves are data/ (stack.py, lock.py, wheel_choice.py: the
file each installer picks). This area locks them (lock), audits the locked
wheels (libraries) and their torch pairs (pairing), compares a venv with a
lock (doctor), and shows a stack in `plan` and `pins show` (plan). See
docs/stacks.md.

Other areas may use the modules in __all__ (the test of the import graph holds them to it).
"""

__all__ = ["doctor", "libraries", "plan"]
