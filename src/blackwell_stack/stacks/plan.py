"""A stack's section of `blackwell-stack plan`, and its pins for `pins show`.

Verified means checked, and each item says how:
- a locked file: its sha256 is the lock's (PyPI's registry sha256 as uv
  recorded it) and `stack audit` downloaded the file and hashed it (the date
  is in wheels.json, made from this very uv.lock);
- a torch pair: `stack audit` checked it against the wheels (METADATA or
  symbol tables), or the kernel is kept out of the lock;
- the same files in both realizations: computed from the lock here (and
  checked against the real uv2nix by tests/test_stacks_nix.py).
A stack without a lock, or whose wheels.json is stale, shows what is missing
and the one command that fills it.
"""

from __future__ import annotations

from typing import Any

from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.data.pins import PinRow
from blackwell_stack.data.plan import PlanItem, PlanSection
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import DataError, StackError
from blackwell_stack.stacks import libraries


def _audit(stack: Stack) -> tuple[dict[str, Any] | None, str | None]:
    """wheels.json when it was made from the current uv.lock, else (None, why not)."""
    try:
        data = libraries.load_audit(stack)
    except DataError:
        raise  # a wheels.json of the wrong shape is refused (exit 3), not shown as files not checked
    except StackError as exc:  # none yet
        return None, exc.message
    if not libraries.audit_is_current(stack, data):
        return None, f"{stack.relpath}/wheels.json was made from another uv.lock"
    return data, None


def locked_files(stack: Stack) -> dict[str, PinRow]:
    """One pin per locked package (by name, sorted): the file it installs on the stack's target, and how its sha256
    was checked."""
    audit, problem = _audit(stack)
    fill = f"blackwell-stack stack audit {stack.name} --write"
    source = f"uv.lock: PyPI's registry sha256, recorded by uv {stack.uv_version}"
    rows = {}
    for name, (pkg, wheel) in sorted(stack.chosen_wheels().items()):
        digest = lockfile.sha256_of(wheel)
        checked = (audit or {}).get("files", {}).get(name)
        ok = bool(checked and digest and checked["sha256"] == digest and checked["file"] == wheels.filename(wheel))
        rows[name] = PinRow(
            what=f"{name} ({stack.name} stack)", version=pkg.version,
            url=wheel.get("url") or wheel.get("path"), hash=f"sha256:{digest}" if digest else None,
            hash_source=source + (f"; {checked['checked']} (stack audit)" if ok else ""),
            hash_checked="registry", verified=ok,
            reason=None if ok else (problem or f"{name}'s file is not in {stack.relpath}/wheels.json"),
            file=f"{stack.relpath}/uv.lock", update_command=fill,
        )
    return rows


def summary_row(stack: Stack) -> PinRow:
    """One row for `pins show`: the stack's lock as a whole."""
    if not stack.locked:
        return PinRow(f"stack {stack.name} (uv.lock)", None, None, None, None, "none", False,
                      stack.missing_lock_message(), f"{stack.relpath}/uv.lock", stack.lock_command)
    rows = list(locked_files(stack).values())
    bad = [r for r in rows if not r.verified]
    return PinRow(
        f"stack {stack.name} (uv.lock)", ", ".join(f"{k} {v}" for k, v in stack.versions().items()), None,
        f"{len(rows)} files", f"every file's sha256 is in uv.lock; {len(rows) - len(bad)} checked by `stack audit`",
        "registry", not bad, f"{len(bad)} file(s) not checked: {bad[0].reason}" if bad else None,
        f"{stack.relpath}/uv.lock", f"blackwell-stack stack audit {stack.name} --write",
    )


def plan_section(stack: Stack, key: str) -> PlanSection:
    name = stack.name
    sec = PlanSection(key, f"Stack {name}{' (default)' if stack.default else ''}: {stack.data['description']}",
                      commands=[f"nix build .#{stack.env_attribute}"])
    if not stack.locked:
        sec.items = [PlanItem("uv.lock", "none", f"{stack.relpath}/stack.json", False, stack.missing_lock_message())]
        sec.commands.insert(0, stack.lock_command)
        return sec
    lock = stack.lock()
    versions = stack.versions(lock)
    audit, problem = _audit(stack)
    by_package = locked_files(stack)
    files = list(by_package.values())
    checked = sum(r.verified for r in files)
    sec.items.append(PlanItem(
        "uv.lock", f"{len(files)} packages, uv {stack.uv_version}, Python {stack.python}, {stack.system}",
        f"{stack.relpath}/uv.lock; `stack lock {name} --check` (tests: network) keeps it current with PyPI",
        checked == len(files), None if checked == len(files) else
        f"{len(files) - checked} file(s) not checked ({problem or 'see below'}). Fill it in with: "
        f"blackwell-stack stack audit {name} --write",
        checked_by=f"{checked} of {len(files)} files hashed by `stack audit`; `uv lock --check` in the tests"))
    sec.items += [_file_item(what, f"{versions[what]} ({package})", by_package[package])
                  for what, package in stack.data["versions_from_lock"].items()]
    kernel = stack.kernel
    pairs = (audit or {}).get("torch_pairs", {}).get("pairs", {})
    kpair = pairs.get(kernel["package"], {})
    sec.items.append(PlanItem(
        kernel["package"], f"{stack.kernel_version} from {kernel['from']}"
        + (f" against torch {versions['torch']} (pkgs/sgl-kernel)" if kernel["from"] == "source"
           else " (the PyPI wheel, its sha256 below)"),
        (f"stack audit: {kpair['found']}" if kpair else f"{stack.relpath}/stack.json")
        + ("; CUDA 13 and sm_120a code: `blackwell-stack inspect` (tests/test_sglang_kernel_wheel.py)"
           if kpair and kernel["from"] == "lock" else ""),
        bool(kpair.get("ok")), None if kpair.get("ok") else (problem or "not checked").rstrip(".")
        + f". Fill it in with: blackwell-stack stack audit {name} --write",
        checked_by="`stack audit`" if kpair.get("ok") else None))
    for package, pair in sorted(stack.torch_pairs.items()):
        if package == kernel["package"]:
            continue
        result = pairs.get(package, {})
        how = {"metadata": "METADATA", "symbols": "symbol tables", "unpaired": "symbol tables; not paired",
               "lock": "symbol tables"}[pair["check"]]
        sec.items.append(PlanItem(
            f"{package} with torch", f"{result.get('version') or '-'}: {result.get('found', 'not checked')}",
            f"stack audit ({how}); {pair['why']}", bool(result.get("ok")),
            None if result.get("ok") else f"{problem or 'the pair does not hold'}. "
            f"Check it with: blackwell-stack stack audit {name}",
            checked_by=f"`stack audit` ({how})" if result.get("ok") else None))
    differing = sorted(wheels.divergent(list(lock.packages.values()), stack.target()))
    sec.items.append(PlanItem(
        "same files in Nix and uv", f"uv's file for every package ({', '.join(differing) or 'no package'} "
        "where uv2nix alone would take another)", "computed from uv.lock here; nix/fixups/wheel-choice.nix; "
        "tests/test_stacks_nix.py (the real uv2nix)", True,
        checked_by="computed from uv.lock here; the real uv2nix in the tests"))
    sec.items += [_file_item(f"{package} {row.version}", (row.url or "").rsplit("/", 1)[-1], row, detail=True)
                  for package, row in by_package.items()]
    return sec


def _file_item(name: str, value: str, row: PinRow, *, detail: bool = False) -> PlanItem:
    """A plan item of a locked file's pin: checked by `stack audit`, or what fills it in."""
    return PlanItem(name, value, row.hash_source if row.verified else row.file, row.verified,
                    None if row.verified else f"{row.reason}. Fill it in with: {row.update_command}",
                    # `stack audit` downloaded the file and compared its sha256 with the lock's
                    checked_by="PyPI's sha256, file hashed by `stack audit`" if row.verified else None, detail=detail)
