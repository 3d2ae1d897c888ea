"""Every pin, in one list: flake inputs, the stacks' locks, the wheel pins a stack keeps, kernel sources."""

from __future__ import annotations

import json
from pathlib import Path

from blackwell_stack.errors import DataError
from blackwell_stack.model import stack as model
from blackwell_stack.model.pins import PinRow
from blackwell_stack.paths import data_path
from blackwell_stack.stacks import plan

KERNEL_SOURCES = "pkgs/sgl-kernel/sources.json"
FLAKE_LOCK = "flake.lock"
# Where each flake.lock narHash came from (flake.lock itself has no room for it).
LOCK_PROVENANCE = "nix/flake-inputs.json"


def wheel_pins_paths() -> list[Path]:
    """The wheel pins files the stacks keep (stack.json kept_wheels.pins), in stack order."""
    paths = [data_path(s.data["kept_wheels"]["pins"]) for s in map(model.load, model.names()) if s.data.get("kept_wheels")]
    return [p for p in paths if p.exists()]


def _wheel_rows() -> list[PinRow]:
    """The wheel pins each stack keeps, as `pins show --stack NAME` lists them."""
    return [row for name in model.names() for row in plan.kept_wheel_pins(model.load(name))]


def _github_url(src: dict) -> str | None:
    if src.get("owner") and src.get("repo"):
        return f"https://github.com/{src['owner']}/{src['repo']}/archive/{src.get('rev')}.tar.gz"
    return src.get("url")


def _source_rows() -> list[PinRow]:
    path = data_path(KERNEL_SOURCES)
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(path, None, None, f"not valid JSON: {exc}") from exc
    rows = []
    entries = []
    if "sglang" in data:
        entries.append(("sglang source (sgl-kernel)", data["sglang"]))
    for name, src in (data.get("fetchcontent") or {}).items():
        entries.append((f"{name} (FetchContent)", src))
    for what, src in entries:
        rows.append(PinRow(what, src.get("tag") or src.get("rev"), _github_url(src), src.get("hash"), src.get("hash_source"),
                           bool(src.get("verified")), src.get("reason"), KERNEL_SOURCES, data.get("update_command")))
    return rows


def _flake_rows() -> list[PinRow]:
    """flake.lock inputs, with the provenance that nix/flake-inputs.json records for each."""
    path = data_path(FLAKE_LOCK)
    if not path.exists():
        return []
    lock = json.loads(path.read_text())
    prov_path = data_path(LOCK_PROVENANCE)
    provenance = json.loads(prov_path.read_text()).get("inputs", {}) if prov_path.exists() else {}
    rows = []
    root = lock["nodes"][lock["root"]]
    for name, node_id in sorted(root.get("inputs", {}).items()):
        locked = lock["nodes"][node_id if isinstance(node_id, str) else node_id[-1]].get("locked", {})
        prov = provenance.get(name, {})
        url = None
        if locked.get("type") == "github":
            url = f"https://github.com/{locked['owner']}/{locked['repo']}/archive/{locked['rev']}.tar.gz"
        verified = bool(locked.get("narHash")) and bool(prov.get("verified")) and prov.get("narHash") == locked.get("narHash")
        reason = prov.get("reason") or (None if verified else f"{LOCK_PROVENANCE} does not vouch for this narHash")
        rows.append(PinRow(f"flake input {name}", locked.get("rev"), url, locked.get("narHash"), prov.get("hash_source"),
                           verified, None if verified else reason, FLAKE_LOCK,
                           json.loads(prov_path.read_text()).get("update_command") if prov_path.exists() else None))
    return rows


def _stack_rows() -> list[PinRow]:
    return [plan.summary_row(model.load(name)) for name in model.names()]


def shared_pins() -> list[PinRow]:
    """What every stack builds on: flake inputs and sgl-kernel's sources."""
    return _flake_rows() + _source_rows()


def all_pins() -> list[PinRow]:
    return _flake_rows() + _stack_rows() + _wheel_rows() + _source_rows()
