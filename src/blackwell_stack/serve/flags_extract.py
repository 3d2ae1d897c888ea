"""`serve flags extract`: SGLang's flag table from an sglang wheel, with argparse's decisions.

The flags come from `sglang/srt/server_args.py` read statically
(flags_static.py): its `parser.add_argument` calls (0.5.9) and, from about
0.5.20, the annotated dataclass fields it registers (flags_fields.py); both
feed the same table. The table also holds what argparse decides about every
option string a user may write (decisions.py: abbreviations, ambiguous
prefixes, negations), so that lib/sglang-service.nix looks them up instead of
reimplementing argparse.
"""

from __future__ import annotations

import ast
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from blackwell_stack import inputfiles
from blackwell_stack.errors import StackError
from blackwell_stack.formats import zipmember
from blackwell_stack.hashes import hex_to_sri, sha256_file
from blackwell_stack.serve import flags_fields
from blackwell_stack.serve.flags import GENERATOR, SCHEMA_VERSION, table_path
from blackwell_stack.serve.flags_decisions import decisions
from blackwell_stack.serve.flags_static import (
    SERVER_ARGS,
    ModuleScan,
    flag_entry,
    is_add_argument,
    parse_source,
    scan_module,
)

# The wheel a table is extracted from: the pure wheel where there is one (0.5.9),
# else the CPython 3.12 x86_64 one that the stacks install (0.5.23 ships only platform wheels).
WHEEL_HINT = "sglang-{version}-py3-none-any.whl or sglang-{version}-cp312-cp312-manylinux_2_34_x86_64.whl"


def _table(entries: list[tuple[list[str], dict[str, Any]]], filename: str) -> dict[str, Any]:
    """{"flags", "options"} from (option strings, entry) in registration order; the first of a name wins."""
    flags: dict[str, dict[str, Any]] = {}
    options: dict[str, str] = {}
    for names, entry in entries:
        primary = names[0]
        if primary in flags:
            # Defined twice (e.g. by two parsers): keep the first, as argparse would refuse a second.
            continue
        flags[primary] = entry
        for name in names + entry["negations"]:
            options.setdefault(name, primary)
    if not flags:
        raise StackError(
            f"{filename}: no parser.add_argument(...) calls found",
            "is this sglang/srt/server_args.py? The layout may have changed; check the wheel",
        )
    return {"flags": flags, "options": dict(sorted(options.items())), **decisions(flags, options)}


def _add_argument_entries(tree: ast.Module, module: ModuleScan, filename: str) -> list[tuple[list[str], dict[str, Any]]]:
    """The parser.add_argument(...) calls of server_args.py, in source order."""
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call) and is_add_argument(n)), key=lambda n: n.lineno)
    return [flag_entry(n, module, filename) for n in calls]


def extract_source(source: str, filename: str = SERVER_ARGS) -> dict[str, Any]:
    """The flag table of a server_args.py source text whose flags are all add_argument calls."""
    tree = parse_source(source, filename)
    return _table(_add_argument_entries(tree, scan_module(tree), SERVER_ARGS), filename)


def extract_files(read: Callable[[str], str | None], label: str) -> dict[str, Any]:
    """The flag table of an SGLang source tree; read(path) gives a file's text or None.

    Both layouts: add_argument calls in server_args.py (0.5.9), and annotated
    dataclass fields registered by add_cli_args_from_dataclass before the few
    remaining add_argument calls (flags_fields.py).
    """
    source = read(SERVER_ARGS)
    if source is None:
        raise StackError(f"{label}: no {SERVER_ARGS}", "pass the sglang wheel from PyPI")
    filename = f"{label}:{SERVER_ARGS}"
    tree = parse_source(source, filename)
    if not flags_fields.uses_fields_layout(tree):
        return _table(_add_argument_entries(tree, scan_module(tree), SERVER_ARGS), filename)
    # Names server_args.py imports (choices lists, custom actions) resolve in their own modules.
    modules = flags_fields._Modules(read)
    module = modules.scan(flags_fields.SERVER_ARGS_MODULE)
    field_entries = flags_fields.extract_fields(modules)
    # server_args.py's own flags take `default=_declared_default("field")`.
    defaults = flags_fields.field_defaults(modules)
    module.call_resolvers["_declared_default"] = lambda name: (name in defaults, defaults.get(name))
    return _table(field_entries + _add_argument_entries(tree, module, SERVER_ARGS), filename)


def extract_wheel(wheel: Path) -> dict[str, Any]:
    """The flag table of an sglang wheel, with the wheel's name and hashes recorded."""
    wheel = Path(wheel)
    inputfiles.regular_file(wheel, hint="download it with `pip download sglang==<version> --no-deps`")
    version = _wheel_version(wheel.name)
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = set(zf.namelist())
            if SERVER_ARGS not in members:
                raise StackError(
                    f"{wheel}: not an sglang wheel with {SERVER_ARGS}",
                    "pass the sglang wheel from PyPI: " + WHEEL_HINT.format(version=version),
                )

            def read(path: str) -> str | None:
                return zipmember.read_member(zf, path, wheel).decode("utf-8", errors="replace") if path in members else None

            table = extract_files(read, wheel.name)
    except zipfile.BadZipFile as exc:
        raise StackError(
            f"{wheel}: not an sglang wheel with {SERVER_ARGS} ({exc})",
            "pass the sglang wheel from PyPI: " + WHEEL_HINT.format(version=version),
        ) from exc
    digest = sha256_file(wheel)
    return {
        "schema_version": SCHEMA_VERSION,
        "description": (
            "Flags accepted by sglang's launch_server, extracted statically (ast) from "
            f"{SERVER_ARGS} of the wheel below and the field classes it registers "
            "(each flag's file and line). Choices held in module-level lists can be "
            "extended at run time by plugins (add_*_choices); the table holds what the wheel ships. "
            "`options`, `abbreviations`, `ambiguous` and `negated` are argparse's reading of every option string a "
            "user may write (exact spellings, accepted prefixes, refused prefixes with what they could mean, --no-X "
            "spellings), computed here so that lib/sglang-service.nix looks them up. "
            "Generated data: do not edit by hand."
        ),
        "sglang_version": version,
        "wheel": {
            "filename": wheel.name,
            "sha256": digest,
            "hash": hex_to_sri(digest),
            "hash_source": "sha256 of the wheel file computed here; the extractor's test checks it against PyPI's registry sha256",
        },
        "source_file": SERVER_ARGS,
        "generator_command": GENERATOR.format(wheel=wheel.name, version=version),
        **table,
    }


def _wheel_version(filename: str) -> str:
    parts = filename.split("-")
    if len(parts) < 3 or not filename.endswith(".whl"):
        raise StackError(f"{filename}: not a wheel file name", "expected " + WHEEL_HINT.format(version="<version>"))
    return parts[1]


def default_output(wheel: Path) -> Path:
    """Where `serve flags extract` writes the table of `wheel` without --output: beside the others, by its version."""
    return table_path(_wheel_version(Path(wheel).name))
