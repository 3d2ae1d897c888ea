"""What of a pinned source tree the build reads: a pin's `filter` in pkgs/sgl-kernel/sources.json.

A pinned repository may hold parts that no build step reads: CUTLASS's media/, docs/ and test/; all of triton
but the triton_kernels package that sgl-kernel's CMakeLists.txt installs; nlohmann/json beyond the files of its
release archive. Such a pin is of the filtered tree: its NAR hash covers only what the filter selects. One rule,
applied the same way everywhere: `kernel sources check` hashes only the selected part of a directory (so a full
checkout passes as well as a filtered one), `kernel sources fetch` keeps only it, the build stages only it, and the
Nix fetch removes the rest in fetchzip's postFetch (lib/kernel-sources.nix `filterScript`).

A filter either keeps a list of paths (with the directories that lead to them, and nothing else in those) or
drops a list of paths; paths are relative, '/'-separated.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack.errors import StackError


@dataclass(frozen=True)
class Filter:
    keep: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()

    @classmethod
    def of(cls, pin: Mapping[str, Any]) -> Filter | None:
        """The pin's filter, or None when the pin is of the whole tree."""
        spec = pin.get("filter")
        if not spec:
            return None
        return cls(keep=tuple(spec.get("keep") or ()), drop=tuple(spec.get("drop") or ()))

    def selects(self, relpath: str) -> bool:
        """Whether the path (relative to the tree's root, '/'-separated; '' is the root) is in the filtered tree."""
        if not relpath:
            return True
        if self.drop:
            return not any(relpath == d or relpath.startswith(d + "/") for d in self.drop)
        return any(relpath == k or relpath.startswith(k + "/") or k.startswith(relpath + "/") for k in self.keep)

    def ignore(self, root: Path) -> Callable[[str, list[str]], set[str]]:
        """A shutil.copytree `ignore` that leaves out what the filter does not select under root."""
        top = os.path.abspath(root)

        def ignored(directory: str, names: list[str]) -> set[str]:
            rel = os.path.relpath(os.path.abspath(directory), top)
            rel = "" if rel == "." else rel.replace(os.sep, "/")
            return {n for n in names if not self.selects(f"{rel}/{n}" if rel else n)}

        return ignored

    def apply(self, root: Path) -> None:
        """Remove from the tree at root everything the filter does not select (a fetched tree, before it is
        hashed and moved into place)."""
        absent = [k for k in self.keep if not os.path.lexists(root / k)]  # then the filter is not of this tree
        if absent:
            raise StackError(f"{root} has no {', '.join(absent)}, which its pin's filter keeps",
                             "the upstream tree changed: check the source and its pin in pkgs/sgl-kernel/sources.json")
        ignored = self.ignore(root)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in ignored(dirpath, dirnames + filenames):
                target = os.path.join(dirpath, name)
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.rmtree(target)
                else:
                    os.unlink(target)
            dirnames[:] = [d for d in dirnames if os.path.lexists(os.path.join(dirpath, d))]
