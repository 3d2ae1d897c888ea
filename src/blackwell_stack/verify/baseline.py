"""Baselines: the figures a bench result is compared with.

A baseline is a JSON file of expectations. Each names a metric of a bench level (`output_tok_s`, or a summary field
such as `decode_tok_s.p50`), the level(s) it applies to (`concurrency`, or every level from `min_concurrency` up,
where the best one counts), a value and a relation: `at_least` (measured >= value x (1 - tolerance)) or `about`
(within the tolerance either side, reported as a ratio). The default target's baseline (the seed report's figures,
docs/reference-deployment.md#results) ships in baselines/ beside this file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack.data import registry
from blackwell_stack.errors import DataError

DEFAULT_BASELINE = registry.path("baseline", "qwen3.5-397b-a17b-nvfp4-sm120")


@dataclass(frozen=True)
class Expectation:
    name: str
    metric: str
    value: float
    relation: str
    concurrency: int | None = None
    min_concurrency: int | None = None


@dataclass(frozen=True)
class Baseline:
    path: Path
    target: str
    model: str
    source: str
    tolerance: float
    expectations: tuple[Expectation, ...]

    def matches_model(self, model: str) -> bool:
        """True when `model` names the baseline's model (any org prefix or local directory)."""
        tail = self.model.rsplit("/", 1)[-1].lower()
        return model.rstrip("/").rsplit("/", 1)[-1].lower() == tail


def load(path: str | Path) -> Baseline:
    path = Path(path)
    data = registry.load("baseline", file=path, hint="see src/blackwell_stack/verify/baselines/ for the format",
                         missing=DataError(path, None, None, "no such baseline file",
                                           "pass --baseline an existing file, or --baseline none"),
                         check=_check)
    return _build(data, path)


def _check(data: dict, file: Path) -> None:
    _build(data, file)  # inside the registry's load, which knows whose file it is (exit 2 for a user's)


def _build(data: dict, path: Path) -> Baseline:
    """The baseline of data (its shape is the registry's: data/schemas.py BASELINE)."""
    expectations = []
    for item in data["expectations"]:
        if ("concurrency" in item) == ("min_concurrency" in item):
            raise DataError(path, f"expectations.{item['name']}", None, "needs exactly one of concurrency and min_concurrency")
        expectations.append(Expectation(**{**item, "value": float(item["value"])}))  # the schema's keys alone
    return Baseline(path, data["target"], data["model"], data["source"], float(data.get("tolerance", 0.1)),
                    tuple(expectations))


def _metric(level: dict, metric: str) -> float | None:
    """level's value at the dotted path `metric`: a finite JSON number (NaN compares as neither below nor above, so
    it would always pass; true is not 1), else None."""
    value: object = level
    for part in metric.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def compare(baseline: Baseline, levels: list[dict]) -> list[dict]:
    """One row per expectation: measured value, ratio to the baseline, and status ok/below/above/not measured."""
    rows = []
    for exp in baseline.expectations:
        if exp.concurrency is not None:
            chosen = [lv for lv in levels if lv["concurrency"] == exp.concurrency]
            where = f"c={exp.concurrency}"
        else:
            chosen = [lv for lv in levels if lv["concurrency"] >= (exp.min_concurrency or 1)]
            where = f"best of c>={exp.min_concurrency}"
        values = [(v, lv["concurrency"]) for lv in chosen if (v := _metric(lv, exp.metric)) is not None]
        row = {"name": exp.name, "metric": exp.metric, "where": where, "baseline": exp.value, "relation": exp.relation,
               "measured": None, "at_concurrency": None, "ratio": None, "status": "not measured"}
        if values:
            measured, conc = max(values)
            ratio, tolerance = measured / exp.value, baseline.tolerance
            if ratio < 1 - tolerance:
                status = "below"
            elif exp.relation == "about" and ratio > 1 + tolerance:
                status = "above"
            else:
                status = "ok"
            row.update(measured=measured, at_concurrency=conc, ratio=ratio, status=status)
        rows.append(row)
    return rows
