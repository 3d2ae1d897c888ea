"""Every Nix file of the project parses with the real nix (nix-instantiate --parse)."""

from __future__ import annotations

import subprocess

import pytest
from support import REPO


def project_nix_files() -> list[str]:
    """Tracked and not-ignored .nix files (what a commit would hold), relative to the repo."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.nix"],
            cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
        ).stdout
        files = sorted({line for line in out.splitlines() if line and (REPO / line).is_file()})
    except (OSError, subprocess.CalledProcessError):
        files = sorted(
            str(p.relative_to(REPO)) for p in REPO.rglob("*.nix")
            if not {".git", ".dev", "result"} & set(p.relative_to(REPO).parts)
        )
    return files


NIX_FILES = project_nix_files()


def test_the_flake_and_its_parts_are_among_the_files():
    for required in ("flake.nix", "nix/stack-set.nix", "nix/stack-env.nix", "nix/cuda-home.nix", "nix/fixups/default.nix",
                     "pkgs/sgl-kernel/default.nix", "pkgs/blackwell-stack/default.nix", "lib/default.nix",
                     "lib/stacks.nix"):
        assert required in NIX_FILES


@pytest.mark.nix
@pytest.mark.parametrize("path", NIX_FILES)
def test_nix_file_parses(nix, path):
    result = subprocess.run([nix.binary, "--parse", path], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{path} does not parse:\n{result.stderr}"
