"""The GSM8K files of the accuracy gate: pinned by URL and sha256 (gsm8k.json beside this file), fetched once.

The data is openai/grade-school-math at one commit, never part of this project: it is downloaded on the user's host
into the user cache (paths.cache_dir) the first time the gate runs, or read from `--data DIR` (train.jsonl and
test.jsonl). Either way every file is read whole (a few MB) and checked against its pinned size and sha256 before a
row of it is used. The pass mark per profile lives in the same file, with its source.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack import download, inputfiles
from blackwell_stack.data import registry
from blackwell_stack.errors import HashMismatch, StackError
from blackwell_stack.paths import cache_dir


@dataclass(frozen=True)
class Example:
    question: str
    answer: str  # the worked solution, ending in `#### <number>`


@dataclass(frozen=True)
class Threshold:
    profile: str
    min_accuracy: float
    kind: str  # "published", "bf16-kv-run" or "floor" (schemas.THRESHOLD_KINDS)
    source: str


@functools.cache
def pins() -> dict[str, Any]:
    return registry.load("gsm8k")


def threshold(profile: str) -> Threshold:
    """The pass mark of `profile`, or a StackError naming the profiles that have one."""
    known = pins()["thresholds"]
    if profile not in known:
        raise StackError(f"no accuracy threshold for the profile {profile!r}",
                         f"pick one of {', '.join(sorted(known))} with --profile, or give --min-accuracy")
    entry = known[profile]
    return Threshold(profile, float(entry["min_accuracy"]), entry["kind"], entry["source"])


def _read_checked(path: Path, split: str) -> bytes:
    """The bytes of one split's file at `path`, refused unless they are the pinned file."""
    pin = pins()["dataset"]["files"][split]
    hint = (f"give --data a directory that holds {pin['file']} of {pins()['dataset']['repository']} at "
            f"{pins()['dataset']['commit'][:12]} ({pin['url']}), or leave --data out to download it")
    try:
        raw = inputfiles.read_bytes(path, limit=pin["size"], what=f"the GSM8K {split} file", hint=hint)
    except (FileNotFoundError, IsADirectoryError):
        raise StackError(f"the GSM8K {split} file {path} is missing", hint) from None
    digest = hashlib.sha256(raw).hexdigest()
    if len(raw) != pin["size"] or digest != pin["sha256"]:
        raise HashMismatch(f"{path}: {len(raw)} bytes with sha256 {digest}, but the pin says {pin['size']} bytes "
                           f"with sha256 {pin['sha256']}", hint)
    return raw


def _cached(split: str) -> Path:
    """The split's file in the user cache, downloaded (and checked) when it is missing or not the pinned file."""
    dataset = pins()["dataset"]
    pin = dataset["files"][split]
    path = cache_dir("gsm8k", dataset["commit"][:12]) / pin["file"]
    if path.is_file() and path.stat().st_size == pin["size"]:
        with contextlib.suppress(HashMismatch):  # a damaged copy: downloaded again below, replacing it whole
            _read_checked(path, split)
            return path
    download.download(pin["url"], path, expected_sha256=pin["sha256"], expected_size=pin["size"],
                      label=f"GSM8K {pin['file']}")
    return path


def load(split: str, data_dir: str | Path | None = None) -> list[Example]:
    """Every row of one split: from data_dir when given, else from the user cache (downloaded the first time)."""
    pin = pins()["dataset"]["files"][split]
    path = Path(data_dir) / pin["file"] if data_dir is not None else _cached(split)
    raw = _read_checked(path, split)
    # The pinned file is JSON Lines (its hash was checked above).
    rows = [Example(str(row["question"]), str(row["answer"])) for row in map(json.loads, raw.decode().splitlines())]
    if len(rows) != pin["rows"]:
        raise HashMismatch(f"{path}: {len(rows)} rows, the pin says {pin['rows']}", "restore gsm8k.json from the "
                           "repository: its size, hash and row count disagree")
    return rows


def describe() -> dict[str, Any]:
    """What the gate ran on, for its report: the repository, the commit, each file's sha256."""
    dataset = pins()["dataset"]
    return {"repository": dataset["repository"], "commit": dataset["commit"],
            "files": {split: {"file": f["file"], "sha256": f["sha256"]} for split, f in dataset["files"].items()}}
