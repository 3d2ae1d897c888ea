"""Test machinery shared by the suite (never shipped in the package)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout the tests run from
