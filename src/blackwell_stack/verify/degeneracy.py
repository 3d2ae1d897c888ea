"""Detectors of garbage model output.

The deployment this project reproduces first answered with runs of `!`, null content and "NaN happened"
(docs/reference-deployment.md#failures-and-fixes). Each detector looks at one symptom of broken numerics and returns
a Finding that names the check and quotes the offending text, or None. That deployment's own failure text is data
(failure-text.json beside this file).

Thresholds are chosen for the smoke prompts (short factual answers at temperature 0): a healthy model does not write
twenty identical non-space characters in a row, loop on one short phrase, write text made of a handful of distinct
characters, or emit U+FFFD (which a server writes when the tokens it decodes are not valid UTF-8: random or NaN
logits pick lone byte tokens).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.data import registry
from blackwell_stack.errors import DataError

MIN_CHAR_RUN = 20  # identical non-whitespace characters in a row
MIN_UNIT_REPEATS = 8  # a short unit (2..24 chars) repeated back to back ...
MIN_UNIT_SPAN = 40  # ... covering at least this many characters
MIN_DIVERSITY_LENGTH = 40  # shorter texts are not judged on diversity
MIN_DISTINCT_CHARS = 6  # distinct non-whitespace characters in a long text
MIN_ENTROPY_BITS = 2.5  # per character; English prose has about 4

_CHAR_RUN = re.compile(rf"(\S)\1{{{MIN_CHAR_RUN - 1},}}")
_UNIT_REPEAT = re.compile(rf"(.{{2,24}}?)\1{{{MIN_UNIT_REPEATS - 1},}}", re.DOTALL)


@dataclass(frozen=True)
class Finding:
    check: str  # stable name: empty-content, char-run, repeated-unit, low-diversity, ...
    detail: str  # what was wrong, in words
    excerpt: str  # the offending text, quoted (repr, shortened)


def excerpt(text: str, start: int = 0, end: int | None = None, width: int = 60) -> str:
    """repr() of text[start:end], cut to about `width` characters, with the cuts marked."""
    end = len(text) if end is None else end
    piece = text[start:end]
    prefix = "..." if start > 0 else ""
    suffix = "..." if len(piece) > width or end < len(text) else ""
    return f"{prefix}{piece[:width]!r}{suffix}"


def empty_content(text: str | None) -> Finding | None:
    if text is None:
        return Finding("empty-content", "content is null", "None")
    if not text.strip():
        return Finding("empty-content", "content is empty or whitespace only", repr(text[:60]))
    return None


def replacement_chars(text: str) -> Finding | None:
    count = text.count("\ufffd")
    if not count:
        return None
    at = text.index("\ufffd")
    return Finding("replacement-char", f"{count} U+FFFD replacement character(s): the decoded tokens were not "
                   "valid UTF-8", excerpt(text, max(0, at - 20), at + 40))


def control_chars(text: str) -> Finding | None:
    bad = [i for i, ch in enumerate(text) if ch not in "\t\n\r" and unicodedata.category(ch) == "Cc"]
    if not bad:
        return None
    return Finding("control-char", f"{len(bad)} control character(s) such as {text[bad[0]]!r}",
                   excerpt(text, max(0, bad[0] - 20), bad[0] + 40))


def char_run(text: str) -> Finding | None:
    match = _CHAR_RUN.search(text)
    if not match:
        return None
    return Finding("char-run", f"{match.group(1)!r} repeated {match.end() - match.start()} times in a row",
                   excerpt(text, match.start(), match.end()))


def repeated_unit(text: str) -> Finding | None:
    for match in _UNIT_REPEAT.finditer(text):
        span = match.end() - match.start()
        unit = match.group(1)
        if span < MIN_UNIT_SPAN or not unit.strip() or len(set(unit)) == 1:  # one character: char-run's finding
            continue
        return Finding("repeated-unit", f"{unit!r} repeated {span // len(unit)} times back to back",
                       excerpt(text, match.start(), match.end()))
    return None


def low_diversity(text: str) -> Finding | None:
    body = "".join(text.split())
    if len(body) < MIN_DIVERSITY_LENGTH:
        return None
    counts = Counter(body)
    if len(counts) < MIN_DISTINCT_CHARS:
        return Finding("low-diversity", f"only {len(counts)} distinct characters in {len(body)}: "
                       f"{''.join(sorted(counts))!r}", excerpt(text))
    entropy = -sum(c / len(body) * math.log2(c / len(body)) for c in counts.values())
    if entropy < MIN_ENTROPY_BITS:
        return Finding("low-diversity", f"character entropy {entropy:.2f} bits (prose has about 4)", excerpt(text))
    return None


# Order matters only for reading: the most specific symptom first.
TEXT_DETECTORS = (replacement_chars, control_chars, char_run, repeated_unit, low_diversity)


def inspect_text(text: str | None, detectors=TEXT_DETECTORS) -> list[Finding]:
    """Every finding of `detectors` on one model output; empty content stops the other checks."""
    empty = empty_content(text)
    if empty or text is None:
        return [empty] if empty else []
    return [f for f in (detector(text) for detector in detectors) if f]


def finish_reason(reason: object) -> Finding | None:
    """OpenAI servers end a healthy answer with `stop` or `length`; anything else is suspect."""
    if reason in ("stop", "length"):
        return None
    if reason is None:
        return Finding("finish-reason", "no finish_reason in the answer", "None")
    return Finding("finish-reason", f"finish_reason is {reason!r}, not 'stop' or 'length'", repr(reason)[:80])


@dataclass(frozen=True)
class FailureText:
    name: str
    pattern: re.Pattern[str]
    what: str
    source: str


def _check_patterns(data: Any, path: Path) -> None:
    for entry in data["failures"]:
        try:
            re.compile(entry["pattern"])
        except re.error as exc:
            raise DataError(path, entry["name"], "pattern", f"not a regular expression ({exc})",
                            "write a Python regular expression") from None


@functools.cache
def failure_texts(path: Path | None = None) -> tuple[FailureText, ...]:
    """The patterns of failure-text.json (or of the file at `path`), checked."""
    data = registry.load("failure-text", file=path, check=_check_patterns)
    return tuple(FailureText(e["name"], re.compile(e["pattern"]), e["what"], e["source"]) for e in data["failures"])


def failure_text(text: str | None, finish_reason: object = None, matched_stop: object = None) -> list[Finding]:
    """A Finding for each pattern of failure-text.json in the answer's text, finish_reason or matched_stop.

    SGLang does not put "NaN happened" in the finish reason: it ends such an answer with finish_reason "stop" and
    writes the text as the choice's `matched_stop` (sglang 0.5.9, schedule_batch.py and serving_chat.py; the data
    file cites them); a proxy or another server may put it in the text itself. So each place is looked at alike.
    """
    given = {"text": text, "finish_reason": finish_reason, "matched_stop": matched_stop}
    places = [(where, value) for where, value in given.items() if isinstance(value, str)]
    findings = []
    for failure in failure_texts():
        for where, value in places:
            match = failure.pattern.search(value)
            if match:
                findings.append(Finding("failure-text", f"{failure.name} in the {where}: {failure.what}",
                                        excerpt(value, max(0, match.start() - 20), match.end() + 20)))
                break  # one finding per pattern: the first place that holds it
    return findings
