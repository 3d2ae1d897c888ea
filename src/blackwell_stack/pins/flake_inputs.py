"""`blackwell-stack pins flake-inputs`: nix/flake-inputs.json brought up to flake.lock after `nix flake update`.

flake.lock is what Nix reads; nix/flake-inputs.json records where each narHash came from. For every input whose
rev, narHash or lastModified in the lock differs from the record (or that has none), the record gets the lock's
values, and its narHash is computed again where it can be: GitHub's archive of the rev, unpacked and hashed as a
flake's github input is (`nix-prefetch-url --unpack`). A computed hash that differs from the lock's stops the
command and nothing is written; one that cannot be computed (no Nix, no network, an input too large to fetch) is
taken from the lock, and the record says so. Inputs the lock no longer has are dropped. The file is written once,
atomically.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from blackwell_stack.data import registry
from blackwell_stack.errors import HashMismatch, StackError
from blackwell_stack.fileio import atomic_write_json
from blackwell_stack.kernel.inputs.sources import prefetch

GITHUB = "https://github.com"
COMMAND = "blackwell-stack pins flake-inputs"
UPDATE_COMMAND = f"nix flake update && {COMMAND}"


@dataclass(frozen=True)
class Change:
    name: str
    rev: str
    narhash: str
    how: str  # "computed", "from the lock", "unchanged", "dropped"
    detail: str = ""


def _follows(node: dict[str, Any]) -> dict[str, str]:
    """The node's inputs that follow another (a path of input names in the lock), as `a/b`."""
    return {child: "/".join(target) for child, target in sorted(node.get("inputs", {}).items())
            if isinstance(target, list)}


def update(*, github: str = GITHUB, offline: bool = False, today: datetime.date | None = None) -> list[Change]:
    """Bring nix/flake-inputs.json up to flake.lock; returns what happened to each input."""
    lock = registry.load("flake-lock")
    path = registry.path("flake-inputs")
    data = registry.load("flake-inputs")
    day = (today or datetime.date.today()).isoformat()
    root = lock["nodes"][lock["root"]]
    records: dict[str, Any] = {}
    changes: list[Change] = []
    for name, node_id in root.get("inputs", {}).items():
        node = lock["nodes"][node_id if isinstance(node_id, str) else node_id[-1]]
        locked = node.get("locked", {})
        if locked.get("type") != "github":
            raise StackError(f"flake.lock: input {name} is of type {locked.get('type')!r}",
                             f"{COMMAND} records github inputs only; record {name} in {path} by hand")
        old = data["inputs"].get(name, {})
        if all(old.get(k) == locked[k] for k in ("rev", "narHash", "lastModified")):
            records[name] = old
            changes.append(Change(name, locked["rev"], locked["narHash"], "unchanged"))
            continue
        url = f"{github}/{locked['owner']}/{locked['repo']}/archive/{locked['rev']}.tar.gz"
        computed, failure = None, ""
        if not offline:
            try:
                computed = prefetch(url)
            except StackError as exc:  # no Nix, no network, no such archive: said in the record
                said = [line.strip() for line in exc.message.splitlines() if line.strip()]
                failure = f"{url} could not be fetched: {said[-1] if said else 'no reason given'}"
        if computed is not None and computed != locked["narHash"]:
            raise HashMismatch(f"flake.lock: input {name} at {locked['rev']} has narHash {locked['narHash']}, but "
                               f"{url} unpacked hashes to {computed}",
                               f"find out which is right before recording either; {path} is left as it was")
        original = node.get("original", {})
        ref = f"/{original['ref']}" if original.get("ref") else ""
        record = {"url": f"github:{original.get('owner')}/{original.get('repo')}{ref}", "rev": locked["rev"],
                  "lastModified": locked["lastModified"], "narHash": locked["narHash"]}
        follows = _follows(node)
        if follows:
            record["follows"] = follows
        if computed is not None:
            record.update(hash_source=f"computed with `nix-prefetch-url --unpack {url}` ({COMMAND}, {day}): the "
                          "lock's narHash", hash_checked="computed")
            changes.append(Change(name, locked["rev"], locked["narHash"], "computed"))
        else:
            record.update(hash_source=f"taken from flake.lock as `nix flake update` wrote it ({COMMAND}, {day}); "
                          "not computed again here" + (f" ({failure})" if failure else " (--offline)"),
                          hash_checked="lock")
            changes.append(Change(name, locked["rev"], locked["narHash"], "from the lock", failure))
        record.update(verified=True, reason=None)
        records[name] = record
    for name in sorted(set(data["inputs"]) - set(records)):
        changes.append(Change(name, "", "", "dropped"))
    atomic_write_json(path, {**data, "update_command": UPDATE_COMMAND, "inputs": records})
    return changes
