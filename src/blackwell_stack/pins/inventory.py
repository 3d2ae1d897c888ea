"""Every pin, in one list: flake inputs, the stacks' locks, kernel sources."""

from __future__ import annotations

from blackwell_stack.data import registry
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.pins import PinRow
from blackwell_stack.kernel.inputs import sources as kernel_sources
from blackwell_stack.stacks import plan


def _github_url(src: dict) -> str | None:
    if src.get("owner") and src.get("repo"):
        return f"https://github.com/{src['owner']}/{src['repo']}/archive/{src.get('rev')}.tar.gz"
    return src.get("url")


def _source_rows() -> list[PinRow]:
    path = registry.path("kernel-sources")
    if not path.exists():
        return []
    data = kernel_sources.load(path)
    entries = [("sglang source (sgl-kernel)", data["sglang"])]
    entries += [(f"{name} (FetchContent)", src) for name, src in data["fetchcontent"].items()]
    file = registry.entry("kernel-sources").pattern
    return [PinRow(what, src.get("tag") or src.get("rev"), _github_url(src), src.get("hash"), src.get("hash_source"),
                   src["hash_checked"], bool(src.get("verified")), src.get("reason"), file, data.get("update_command"))
            for what, src in entries]


def _flake_rows() -> list[PinRow]:
    """flake.lock inputs, with the provenance that nix/flake-inputs.json records for each."""
    if not registry.path("flake-lock").exists():
        return []
    lock = registry.load("flake-lock")
    provenance_file = registry.entry("flake-inputs").pattern
    provenance = registry.load("flake-inputs") if registry.path("flake-inputs").exists() else None
    rows = []
    root = lock["nodes"][lock["root"]]
    for name, node_id in sorted(root.get("inputs", {}).items()):
        locked = lock["nodes"][node_id if isinstance(node_id, str) else node_id[-1]].get("locked", {})
        prov = (provenance or {}).get("inputs", {}).get(name, {})
        url = _github_url(locked) if locked.get("type") == "github" else None
        verified = bool(locked.get("narHash")) and bool(prov.get("verified")) and prov.get("narHash") == locked.get("narHash")
        reason = prov.get("reason") or (None if verified else f"{provenance_file} does not vouch for this narHash")
        rows.append(PinRow(f"flake input {name}", locked.get("rev"), url, locked.get("narHash"), prov.get("hash_source"),
                           prov.get("hash_checked", "none"), verified, None if verified else reason, registry.entry("flake-lock").pattern,
                           provenance["update_command"] if provenance else None))
    return rows


def shared_pins() -> list[PinRow]:
    """What every stack builds on: flake inputs and sgl-kernel's sources."""
    return _flake_rows() + _source_rows()


def all_pins() -> list[PinRow]:
    stacks = [plan.summary_row(stack_data.load(name)) for name in stack_data.names()]
    return _flake_rows() + stacks + _source_rows()
