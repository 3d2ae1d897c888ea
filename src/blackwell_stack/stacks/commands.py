"""`blackwell-stack stack lock|audit|doctor`: the serving stacks (stacks/<name>/); `plan stack-NAME` shows one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from blackwell_stack import output
from blackwell_stack.argtypes import positive_int
from blackwell_stack.data import stack as stack_data
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.stacks import doctor as stack_doctor
from blackwell_stack.stacks import libraries
from blackwell_stack.stacks import lock as locking


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stack", help="the serving stacks: one uv.lock each, realized by uv2nix (Nix) or uv (venv)")
    ssub = p.add_subparsers(dest="stack_command", metavar="ACTION")
    ssub.required = True

    lock = ssub.add_parser(
        "lock",
        help="make the stack's uv.lock (uv 0.10.7, Python 3.12), then audit its wheels",
        epilog="exit codes: 0 locked (or current, with --check); 1 the lock is not current (--check); 2 bad stack; "
        "5 a wheel's sha256 is not the lock's; 6 wrong uv or no Python 3.12; 7 uv could not lock",
    )
    lock.add_argument("name")
    lock.add_argument("--wheels", type=Path, metavar="DIR", help="a directory holding the wheels a stack keeps locally (nightly)")
    lock.add_argument("--python", help="the Python 3.12 to lock with (default: python3.12 on PATH, or pyenv's)")
    lock.add_argument("--uv", help="the uv binary (default: uv on PATH; it must be the stack's version)")
    lock.add_argument("--check", action="store_true", help="only check that uv.lock is current (`uv lock --check`)")
    lock.add_argument("--no-audit", action="store_true", help="do not download and audit the wheels (wheels.json goes stale)")
    lock.set_defaults(func=cmd_lock)

    audit = ssub.add_parser(
        "audit",
        help="download every locked wheel, check its sha256, and read what Nix needs to know (wheels.json)",
        epilog="exit codes: 0 wheels.json matches the wheels (or was written); 1 it differs; 5 a sha256 differs from the lock",
    )
    audit.add_argument("name")
    audit.add_argument("--write", action="store_true", help="write stacks/NAME/wheels.json")
    audit.add_argument("--jobs", type=positive_int, default=4, help="wheels read at once (default: 4)")
    audit.add_argument("--json", action="store_true")
    audit.set_defaults(func=cmd_audit)

    doctor = ssub.add_parser(
        "doctor",
        help="every distribution in a venv that differs from the stack's lock, each with its repair",
        epilog="exit codes: 0 the venv is the lock; 1 a distribution differs (each listed with the command that repairs it)",
    )
    doctor.add_argument("name")
    doctor.add_argument("--python", help="the venv's interpreter (default: this one)")
    doctor.add_argument("--verify-files", action="store_true", help="also hash the installed files against RECORD")
    doctor.add_argument("--json", action="store_true", help="print JSON instead of tables")
    doctor.set_defaults(func=cmd_doctor)


def cmd_lock(args: argparse.Namespace) -> int:
    stack = stack_data.load(args.name)
    new = locking.lock(stack, python=args.python, uv=args.uv, wheels=args.wheels, check=args.check)
    if args.check:
        print(f"{stack.relpath}/uv.lock is current with its pyproject.toml")
        return 0
    assert new is not None
    print(f"locked {stack.relpath}/uv.lock: {len(new.packages) - 1} packages; "
          + ", ".join(f"{k} {v}" for k, v in stack.versions(new).items()))
    if args.no_audit:
        print(f"not audited: write {stack.relpath}/wheels.json with `blackwell-stack stack audit {stack.name} --write` "
              "before building with Nix", file=sys.stderr)
        return 0
    path = libraries.write_audit(stack, libraries.audit(stack, new, libraries.read_all(stack, new)))
    print(f"audited every wheel (sha256 checked): wrote {path}")
    return 0


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Where two wheels.json differ, ignoring when files were checked."""
    def strip(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "files": {k: {f: v for f, v in e.items() if f != "checked"}
                                  for k, e in data.get("files", {}).items()}}

    a, b = strip(old), strip(new)
    return [key for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def cmd_audit(args: argparse.Namespace) -> int:
    stack = stack_data.load(args.name)
    lock = stack.lock()
    data = libraries.audit(stack, lock, libraries.read_all(stack, lock, jobs=args.jobs))
    if args.write:
        path = libraries.write_audit(stack, data)
        print(f"wrote {path}")
        return 0
    if args.json:
        output.dump_json(data)
    try:
        committed = libraries.load_audit(stack)
    except StackError as exc:
        print(f"{exc}", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)
    diff = differences(committed, data)
    if diff:
        print(f"{stack.relpath}/wheels.json differs from the wheels in: {', '.join(diff)}; "
              f"write it with `blackwell-stack stack audit {stack.name} --write`", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)
    if not args.json:
        print(f"{stack.relpath}/wheels.json matches the {len(data['files'])} locked wheels (every sha256 checked)")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    return stack_doctor.run(stack_data.load(args.name), args.python or sys.executable, verify_files=args.verify_files,
                            as_json=args.json, verbose=args.verbose)
