"""CLI commands of the doctor area."""

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    # Placeholder until the doctor commands land.
    pass
