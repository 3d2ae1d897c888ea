"""The `blackwell-stack` command line: one subcommand group per concern.

Each module in COMMAND_MODULES has `register(subparsers)`, which adds its
parsers and sets `func(args) -> int` on them. Exit codes: errors.ExitCode.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from blackwell_stack import __version__
from blackwell_stack.errors import ExitCode, StackError

COMMAND_MODULES = (
    "blackwell_stack.plan",  # plan: the main job
    "blackwell_stack.stacks.commands",  # stack show|lock|audit
    "blackwell_stack.pins.commands",  # pins show|update|vendor
    "blackwell_stack.kernel.commands",  # kernel recipe|patches|build|plan
    "blackwell_stack.serve.commands",  # serve render|check|run
    "blackwell_stack.doctor.commands",  # inspect, doctor, wheel diff
    "blackwell_stack.verify.commands",  # smoke, bench
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="blackwell-stack",
        description="Pin, build, check and verify SGLang + Qwen3.5-397B-A17B-NVFP4 on SM120 with CUDA 13.",
    )
    parser.add_argument("--version", action="version", version=f"blackwell-stack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return int(ExitCode.OK)


if __name__ == "__main__":
    raise SystemExit(main())
