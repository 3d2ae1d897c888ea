"""The `blackwell-stack` command line: `plan`, then each area's commands (cli/areas.py).

Each area's `register(subparsers)` adds its parsers and sets `func(args) -> int` on them. Exit codes:
errors.ExitCode, listed in `--help`. Whatever escapes a command is printed as a message and a hint, never as a
traceback (cli/boundary.py). The global options (-v, --wide) are accepted before the command and after it (`plan
-v`): every parser of the tree has them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import textwrap
import threading
from collections.abc import Iterator

from blackwell_stack import __version__, output, proc
from blackwell_stack.cli import areas, boundary, plan
from blackwell_stack.errors import ExitCode, StackError, exit_codes_help

# What a deploying user needs, in the order `--help` lists it; every other command is a maintainer's, listed apart.
USER_COMMANDS = ("plan", "acceptance", "serve render", "serve check", "serve run", "doctor", "doctor abi", "stack doctor",
                 "smoke", "bench", "accuracy", "kernel build", "kernel test", "kernel sources fetch", "inspect")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="blackwell-stack", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Pin, build, check and verify SGLang + Qwen3.5-397B-A17B-NVFP4 on SM120 with CUDA 13.")
    parser.add_argument("--version", action="version", version=f"blackwell-stack {__version__}")
    _global_options(parser, default=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="one of the commands below (COMMAND --help)")
    sub.required = True
    for register in (plan.register, *areas.COMMANDS):
        register(sub)
    for command, _help in _subparsers(parser):
        _global_options(command, default=argparse.SUPPRESS)
    parser.epilog = _commands_help(parser) + "\n\n" + exit_codes_help()
    sub._choices_actions.clear()  # listed in the epilog instead: the user's commands apart from the maintainers'
    return parser


def commands(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every command that runs something ("kernel sources fetch"), with its help line."""
    return {child.prog.split(" ", 1)[1]: text for child, text in _subparsers(parser) if "func" in child._defaults}


def _commands_help(parser: argparse.ArgumentParser) -> str:
    every = commands(parser)
    lines = ["commands for deploying:"]
    for name in USER_COMMANDS:
        lines += textwrap.wrap(every[name], 78, initial_indent=f"  {name:<22}", subsequent_indent=" " * 24)
    maintainer = ", ".join(name for name in every if name not in USER_COMMANDS)
    lines += ["", "maintainer commands (pins, locks, the kernel's inputs and reference, wheels):"]
    lines += textwrap.wrap(maintainer, 78, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)


def _global_options(parser: argparse.ArgumentParser, default: object) -> None:
    """-v and --wide; on a command's parser with no default, so that one given before the command stays."""
    parser.add_argument("-v", "--verbose", action="store_true", default=default,
                        help="show every external command before it runs ($ ...)")
    parser.add_argument("--wide", action="store_true", default=default,
                        help="print table rows whole on one line instead of fitting them to the terminal width")


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.ArgumentParser, str]]:
    """Every parser below `parser` with its help line, depth first (an alias names the same parser once)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for child in dict.fromkeys(action.choices.values()):
                yield child, helps.get(child.prog.rsplit(" ", 1)[-1], "")
                yield from _subparsers(child)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is, so that it unwinds as from Ctrl-C: the file being written
    is removed, a lock being replaced is restored, the workers stop (parallel.py)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    output.ensure_standard_descriptors()
    # SIGTERM and SIGHUP reach only the main thread. One ignored when the CLI started stays ignored, as Python
    # leaves an ignored SIGINT: under `nohup blackwell-stack kernel build … &` a hang-up must not end the build.
    saved = {} if threading.current_thread() is not threading.main_thread() else {
        signum: signal.signal(signum, _terminated) for signum in (signal.SIGTERM, signal.SIGHUP)
        if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        with output.pipe_safe_output():
            return _main(argv)
    except output.OutputLost as exc:  # stderr may still reach the user where stdout did not
        with contextlib.suppress(OSError, ValueError):
            print(exc, file=sys.stderr)
        return int(ExitCode.USAGE)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _main(argv: list[str] | None) -> int:
    if (empty := _empty_value(sys.argv[1:] if argv is None else argv)) is not None:
        print(f"error: an empty value {empty}: an empty string is not taken to mean the default\n"
              "  hint: leave the option out for its default, or give it a value", file=sys.stderr)
        return int(ExitCode.USAGE)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else int(ExitCode.USAGE)
    except Exception as exc:  # a data file a command reads for its help text
        return _failed(exc)
    proc.set_verbose(args.verbose)
    output.set_wide(args.wide)
    try:
        return int(args.func(args) or 0)
    except Terminated as exc:
        print(f"terminated ({exc})", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        return _failed(exc)
    finally:
        proc.set_verbose(False)
        output.set_wide(False)


def _empty_value(argv: list[str]) -> str | None:
    """Where argv has an empty value (`--model ""`, `--out=`, `inspect ""`), up to a `--` (what follows is
    SGLang's); None when it has none."""
    for i, arg in enumerate(argv):
        if arg == "--":
            return None
        if arg == "":
            return f"for {argv[i - 1]}" if i and argv[i - 1].startswith("-") else f"as argument {i + 1}"
        if arg.startswith("--") and arg.endswith("=") and "=" not in arg[:-1]:
            return f"for {arg[:-1]}"
    return None


def _failed(exc: Exception) -> int:
    if os.environ.get(boundary.TRACEBACK_ENV) and not isinstance(exc, StackError):
        raise exc
    failure = boundary.describe(exc)
    print(f"error: {failure.message}", file=sys.stderr)
    return int(failure.code)

if __name__ == "__main__":
    raise SystemExit(main())
