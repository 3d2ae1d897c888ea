"""argparse types that refuse impossible numbers and URLs at the command line (exit 2, with the option named)."""

from __future__ import annotations

import argparse
import math
from urllib.parse import urlsplit


def positive_int(text: str) -> int:
    return _int(text, 1, "is not a positive whole number (1 or more)")


def non_negative_int(text: str) -> int:
    return _int(text, 0, "is negative (0 or more)")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def _int(text: str, least: int, below: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r} {below}")
    return value


def web_url(text: str) -> str:
    """An http(s) or file URL whose host can be looked up: what urllib would otherwise refuse mid-command."""
    try:
        parts = urlsplit(text)
        _ = parts.port  # a port out of range raises here
    except ValueError as exc:  # "Invalid IPv6 URL", a port out of range
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL ({exc})") from None
    if parts.scheme == "file" and parts.path:
        return text
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL (or a file: URL)")
    if problem := host_name_problem(parts.hostname):
        raise argparse.ArgumentTypeError(f"{text!r}: the host name {parts.hostname!r} is not valid ({problem})")
    return text


def host_name_problem(host: str) -> str | None:
    """Why a host name cannot be looked up (IDNA refuses an empty or over-long label: a..b), or None."""
    if ":" in host:  # an IPv6 address
        return None
    try:
        host.encode("idna")
    except UnicodeError as exc:
        return str(exc).removeprefix("encoding with 'idna' codec failed ").strip("()") or "IDNA refuses it"
    return None
