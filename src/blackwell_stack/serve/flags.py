"""SGLang's flag table of one SGLang version, as committed: `modules/sglang-flags/<version>.json`.

The table is data, extracted from the sglang wheel (scripts/sglang-flags/flags_extract.py, with the wheel's name and
sha256); a stack selects its table by the version of SGLang it holds (`load_table(version)`, and `flagTableFor` in
lib/sglang-service.nix). Besides each flag (dest, type, number of values, choices, default, negations) it holds
argparse's decisions about every option string: exact spellings (`options`), accepted abbreviations, ambiguous
prefixes and negating spellings.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.data import registry, versions
from blackwell_stack.data.profile import load_profile
from blackwell_stack.errors import DataError

GENERATOR = "python scripts/sglang-flags/flags_extract.py --wheel {wheel} --output modules/sglang-flags/{version}.json"
SCHEMA_VERSION = 3


@dataclass(frozen=True)
class FlagTable:
    path: Path
    data: dict[str, Any]


def table_path(version: str) -> Path:
    """Where the flag table of sglang `version` is committed."""
    versions.parse(version)  # a version, not a path
    return registry.path("flag-table", version)


def available_versions() -> list[str]:
    """The SGLang versions that have a committed flag table, oldest first."""
    found = [p.stem for p in registry.entry("flag-table").files()]
    return sorted(found, key=versions.parse)


def extract_command(version: str) -> str:
    """The commands that make the flag table of sglang `version` (the message Nix gives too)."""
    return (
        f"pip download sglang=={version} --no-deps --only-binary=:all: --python-version 3.12 "
        f"--platform manylinux_2_34_x86_64 -d . && "
        + GENERATOR.format(wheel=f"sglang-{version}-*.whl", version=version)
    )


def load_table(version: str | None = None, path: Path | None = None) -> FlagTable:
    """The flag table of sglang `version` (default: the default profile's), or of the file at `path`."""
    if path is None:
        if version is None:
            version = load_profile().runtime().sglang
        path = table_path(version)
        if not path.is_file():
            have = ", ".join(available_versions()) or "none"
            raise DataError(
                path, None, None, f"no SGLang flag table for sglang {version} (tables: {have})",
                "extract it from the sglang wheel: " + extract_command(version),
            )
    data = registry.load("flag-table", file=path, missing=DataError(
        path, None, None, "no such flag table", "pass a table written by scripts/sglang-flags/flags_extract.py"))
    if version is not None and data["sglang_version"] != version:
        raise DataError(
            path, None, "sglang_version", f"is {data['sglang_version']}, expected {version}",
            "regenerate it: " + extract_command(version),
        )
    return FlagTable(path, data)


def canonical(option: str, table: dict[str, Any]) -> tuple[str | None, list[str]]:
    """How SGLang's parser reads an option string: (primary spelling, []) for an exact option or an accepted
    abbreviation; (None, the option strings it could mean) for an ambiguous prefix; (None, []) otherwise.

    Looked up in the table's decisions (scripts/sglang-flags/flags_decisions.py), as lib/sglang-service.nix does.
    """
    if option in table["options"]:
        return table["options"][option], []
    if option in table["abbreviations"]:
        return table["abbreviations"][option], []
    return None, list(table["ambiguous"].get(option, []))


def suggest(option: str, table: dict[str, Any]) -> str | None:
    """The flag a misspelled option most likely meant, or None: first an option whose dest is what was typed
    (`--fp4-gemm-runner-backend` is the dest of `--fp4-gemm-backend`), then difflib's closest spelling."""
    wanted = option.lstrip("-").replace("-", "_")
    for name in sorted(table["flags"]):
        if table["flags"][name]["dest"] == wanted:
            return name
    close = difflib.get_close_matches(option, sorted(table["options"]), n=1)
    return close[0] if close else None
