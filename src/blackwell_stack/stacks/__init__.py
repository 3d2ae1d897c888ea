"""Serving stacks: `stacks/<name>/` (pyproject.toml, uv.lock, stack.json).

One lock, two realizations: uv2nix builds the lock in Nix (lib/stacks.nix,
nix/stack-set.nix) and `uv sync --frozen` installs it into a venv. This
package reads the stacks (model), locks them (lock), picks each package's file
as uv and uv2nix do (wheels), audits the locked wheels (libraries) and their
torch pairs (pairing), compares a venv with a lock (doctor), and shows a stack
in `plan` and `pins show` (plan). See docs/stacks.md.
"""
