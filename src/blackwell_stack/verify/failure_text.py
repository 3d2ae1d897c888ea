"""The reference deployment's own failure text, kept as data (failure-text.json beside this file), and its check.

The seed deployment answered with runs of `!`, null content and "NaN
happened" (docs/reference-deployment.md#failures-and-fixes). SGLang does not
put "NaN happened" in the finish reason: it ends such an answer with
finish_reason "stop" and writes the text as the choice's `matched_stop`
(sglang 0.5.9, schedule_batch.py and serving_chat.py; the data file cites
them); a proxy or another server may put it in the text itself. So every
pattern of the file is looked for in the answer's text, its finish reason
and its matched_stop alike. Null content is the empty-content check of
degeneracy.py.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.data import registry
from blackwell_stack.errors import DataError
from blackwell_stack.verify.degeneracy import Finding, excerpt

CHECK = "failure-text"


@dataclass(frozen=True)
class FailureText:
    name: str
    pattern: re.Pattern[str]
    what: str
    source: str


def _check(data: Any, path: Path) -> None:
    for entry in data["failures"]:
        try:
            re.compile(entry["pattern"])
        except re.error as exc:
            raise DataError(path, entry["name"], "pattern", f"not a regular expression ({exc})",
                            "write a Python regular expression") from None


@functools.cache
def load(path: Path | None = None) -> tuple[FailureText, ...]:
    """The patterns of failure-text.json (or of the file at `path`), checked."""
    data = registry.load("failure-text", file=path, check=_check)
    return tuple(FailureText(e["name"], re.compile(e["pattern"]), e["what"], e["source"]) for e in data["failures"])


def find(text: str | None, finish_reason: object = None, matched_stop: object = None) -> list[Finding]:
    """A Finding for each place (text, finish_reason, matched_stop) that holds one of the failure patterns."""
    places = [("text", text), ("finish_reason", finish_reason), ("matched_stop", matched_stop)]
    findings = []
    for failure in load():
        for where, value in places:
            if not isinstance(value, str):
                continue
            match = failure.pattern.search(value)
            if match:
                findings.append(Finding(CHECK, f"{failure.name} in the {where}: {failure.what}",
                                        excerpt(value, max(0, match.start() - 20), match.end() + 20)))
                break  # one finding per pattern: the first place that holds it
    return findings
