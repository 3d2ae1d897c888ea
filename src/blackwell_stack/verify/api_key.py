"""The bearer token of the server under test: --api-key or --api-key-file, for every command that asks a server."""

from __future__ import annotations

import argparse

from blackwell_stack import inputfiles
from blackwell_stack.errors import StackError

# An API key is a line of text; a file much larger than that is not the key file meant.
API_KEY_FILE_LIMIT = 64 * inputfiles.KIB


def add_options(parser: argparse.ArgumentParser) -> None:
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--api-key", help="bearer token, if the server wants one (visible in the process list)")
    keys.add_argument("--api-key-file", help="file holding the bearer token (a systemd credential, for example)")


def from_args(args: argparse.Namespace) -> str | None:
    if not args.api_key_file:
        return args.api_key
    hint = "pass a regular file that holds the key (a systemd credential is one), or --api-key"
    try:
        key = inputfiles.read_text(args.api_key_file, limit=API_KEY_FILE_LIMIT, what="--api-key-file", hint=hint).strip()
    except OSError as exc:
        raise StackError(f"cannot read --api-key-file {args.api_key_file}: {exc.strerror}", hint) from None
    if not key:
        raise StackError(f"--api-key-file {args.api_key_file} is empty", "write the server's API key into that file")
    return key
