"""CLI commands of the kernel area."""

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    # Placeholder until the kernel commands land.
    pass
