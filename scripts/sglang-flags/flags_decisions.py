"""What argparse decides about each option string a user may write, computed once per flag table.

SGLang's parser is an argparse parser with allow_abbrev: besides its exact
option strings it accepts any prefix of them that starts with `--` and fits
one flag (`--tp` for `--tp-size`); a prefix that fits several flags is refused
as ambiguous; a `--no-X` spelling of an argparse.BooleanOptionalAction (or a
prefix fitting only such spellings) stores False. The extractor writes these
decisions into the table, so that both sides look them up instead of
reimplementing argparse: render.py, secrets.py and lib/sglang-service.nix.

    abbreviations  prefix -> the flag it means (exact option strings are in `options`)
    ambiguous      prefix -> the option strings it could mean, sorted (nothing shorter than `--`)
    negated        every option string or abbreviation that argparse reads as --no-X -> its flag
"""

from __future__ import annotations

import json
from typing import Any

KEYS = ("abbreviations", "ambiguous", "negated")


def decisions(flags: dict[str, dict[str, Any]], options: dict[str, str]) -> dict[str, dict[str, Any]]:
    """{"abbreviations", "ambiguous", "negated"} for a table's flags and exact options (option -> primary)."""
    prefixes: dict[str, list[str]] = {}
    for option in sorted(options):
        for end in range(2, len(option)):
            prefixes.setdefault(option[:end], []).append(option)
    abbreviations: dict[str, str] = {}
    ambiguous: dict[str, list[str]] = {}
    negated = {option: primary for option, primary in options.items() if option in flags[primary]["negations"]}
    for prefix, matches in prefixes.items():
        if prefix in options or not prefix.startswith("--"):
            continue
        primaries = {options[m] for m in matches}
        if len(primaries) == 1:
            (primary,) = primaries
            abbreviations[prefix] = primary
            if all(m in flags[primary]["negations"] for m in matches):
                negated[prefix] = primary
        else:
            ambiguous[prefix] = matches
    return {
        "abbreviations": dict(sorted(abbreviations.items())),
        "ambiguous": dict(sorted(ambiguous.items())),
        "negated": dict(sorted(negated.items())),
    }


def render_table(table: dict[str, Any]) -> str:
    """The table as JSON text: indented, except the decisions, which are thousands of short entries written one
    per line."""
    head = json.dumps({k: v for k, v in table.items() if k not in KEYS}, indent=2)
    maps = []
    for key in KEYS:
        entries = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in table[key].items())
        maps.append(f"  {json.dumps(key)}: {{\n{entries}\n  }}")
    return head[: -len("\n}")] + ",\n" + ",\n".join(maps) + "\n}\n"
