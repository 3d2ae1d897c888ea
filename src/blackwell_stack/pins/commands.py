"""CLI commands of the pins area."""

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    # Placeholder until the pins commands land.
    pass
