"""CLI commands of the verify area."""

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    # Placeholder until the verify commands land.
    pass
