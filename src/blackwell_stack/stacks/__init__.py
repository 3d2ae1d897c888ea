"""Serving stacks: `stacks/<name>/` (pyproject.toml, uv.lock, stack.json).

One lock, two realizations: uv2nix builds the lock in Nix (lib/stacks.nix,
nix/stack-set.nix) and `uv sync --frozen` installs it into a venv. This
package reads the stacks (model), locks them (lock), audits the locked wheels
(libraries), compares a venv with a lock (doctor) and repacks an installed
distribution (rescue). See docs/stacks.md.
"""
