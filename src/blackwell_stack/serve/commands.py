"""CLI commands of the serve area."""

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    # Placeholder until the serve commands land.
    pass
