"""torch and the packages with compiled torch code: are they built for each other?

stack.json `torch_pairs` says, for each package whose libraries link torch,
how the pair is checked against the locked wheels:

- `metadata`: its METADATA requires exactly the locked torch (torchvision);
- `symbols`: every torch symbol its libraries leave undefined is defined by
  the locked torch's libraries (torch's stable C ABI and C++ symbols alike);
- `source`: it is not in the lock at all; it is built from source against
  the stack's torch (sgl-kernel);
- `lock`: it is in the lock and its symbols resolve in the locked torch
  (a prebuilt kernel, `kernel.from = "lock"`);
- `unpaired`: it is not built for this torch; the symbol check records what
  is missing and `why` says why that is harmless.

Which packages link torch is read from the wheels (DT_NEEDED naming one of
torch's libraries), so a new one cannot go unlisted: it shows up in
`unlisted`.
"""

from __future__ import annotations

from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from blackwell_stack.data.stack import Lock, Stack
from blackwell_stack.formats import linkage


def _metadata_pin(requires: list[str]) -> str | None:
    """The `torch==X` requirement of a METADATA (markers for linux x86_64), or None."""
    env = {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64", "extra": ""}
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and (req.marker is None or req.marker.evaluate(env)):
            return f"{req.name}{req.specifier}"
    return None


def check(stack: Stack, lock: Lock, contents: dict[str, Any]) -> dict[str, Any]:
    """Each pair of stack.json checked against the wheels, plus `unlisted` torch-linked packages."""
    torch = lock.get("torch")
    torch_version = torch.version if torch else None
    torch_defined = set(contents["torch"].torch_defined) if "torch" in contents else set()
    out: dict[str, Any] = {}
    for name, pair in sorted(stack.torch_pairs.items()):
        how = pair["check"]
        locked = lock.get(name)
        result: dict[str, Any] = {"check": how, "version": locked.version if locked else None}
        if how == "source":
            result["ok"] = (locked is None and name in lock.excludes
                            and stack.kernel["from"] == "source" and stack.kernel["package"] == name)
            result["found"] = ("excluded from the lock (tool.uv exclude-dependencies), built from source"
                               if result["ok"] else "in the lock, or not excluded")
        elif name not in contents:
            result["ok"] = False
            result["found"] = "not in the lock"
        elif how == "metadata":
            pin = _metadata_pin(contents[name].requires)
            result["ok"] = pin == f"torch=={torch_version}"
            result["found"] = f"Requires-Dist {pin}" if pin else "no torch requirement in METADATA"
        else:  # symbols, lock, unpaired
            needed = sorted({s for info in contents[name].elf.values() for s in info.torch_undefined})
            missing = [s for s in needed if s not in torch_defined]
            result.update(needed=len(needed), missing=missing, ok=(how == "unpaired" or not missing),
                          found=f"{len(needed) - len(missing)} of {len(needed)} torch symbols resolve in torch "
                          f"{torch_version}")
        out[name] = result
    # Packages (other than torch) with a library that links one of torch's libraries, and no pair in stack.json.
    unlisted = sorted(name for name, c in contents.items() if name != "torch" and name not in stack.torch_pairs
                      and any(linkage.torch_libraries(i.needed) for i in c.elf.values()))
    return {"torch": torch_version, "pairs": out, "unlisted": unlisted}
