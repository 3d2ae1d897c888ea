"""The stacks as data: `stacks/<name>/stack.json` and `stacks/<name>/uv.lock`.

stack.json (schema 1) says what the lock cannot: which packages carry the
key versions, where the kernel comes from, how each package with compiled
torch ops pairs with torch, and the one command that makes a missing lock.
lib/stacks.nix reads the same files with builtins only; tests compare the two.

    {
      "schema_version": 1, "name", "description", "audience", "default" (bool),
      "system" ("x86_64-linux"), "python" ("3.12"), "uv" ("0.10.7"),
      "versions_from_lock": {"sglang": <package>, "flashinfer": <package>, "torch": <package>},
      "kernel": {"package", "version" (null when "from" is "lock"), "from": "source" | "lock", "why"},
      "torch_pairs": {<package>: {"check": "metadata" | "symbols" | "source" | "lock" | "unpaired", "why"}},
      "profiles": [<profile name>, ...]  (the first is the stack's default: serve --stack, the module's stack option),
      "kept_wheels": {"url_template", "why"}   (optional: wheels the lock takes from ./wheels/)
      "lock": {"command", "missing_reason" (why there is no uv.lock, or null)}
    }
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from blackwell_stack.data import registry, wheel_choice
from blackwell_stack.data.lock import Lock, LockedPackage, load_lock
from blackwell_stack.errors import DataError, StackError
from blackwell_stack.paths import data_path

STACKS_DIR = "stacks"
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


class Stack:
    """One stack, resolved where a command starts and passed down; its lock is parsed once."""

    def __init__(self, name: str, path: Path, data: dict[str, Any]) -> None:
        self.name = name
        self.path = path  # stacks/<name>
        self.data = data
        # What stack.json says, by name; the profiles are serving profiles (modules/profiles/<name>.json), the first
        # the stack's default; env_attribute is the flake's package of its environment (lib/stacks.nix `envName`).
        self.relpath = f"{STACKS_DIR}/{name}"
        self.lock_path = path / "uv.lock"
        self.lock_command: str = data["lock"]["command"]
        self.python: str = data["python"]
        self.system: str = data["system"]
        self.uv_version: str = data["uv"]
        self.default = bool(data.get("default"))
        self.kernel: dict[str, Any] = data["kernel"]
        self.torch_pairs: dict[str, dict[str, str]] = data["torch_pairs"]
        self.profiles: list[str] = list(data["profiles"])
        self.env_attribute = "sglang-env" if self.default else f"sglang-env-{name}"
        # The parsed lock and the file state it was parsed from: parsed again only when the file changes
        # (`stack lock` writes a new one).
        self._lock: tuple[tuple[int, int, int], Lock] | None = None

    @property
    def locked(self) -> bool:
        return self.lock_path.is_file()

    @property
    def kernel_version(self) -> str | None:
        """The kernel version the stack runs: the one it builds, or the one its lock holds (None without a lock)."""
        if self.kernel["from"] == "source":
            return str(self.kernel["version"])
        locked = self.lock().get(self.kernel["package"]) if self.locked else None
        return locked.version if locked else None

    def require_source_kernel(self) -> None:
        """StackError unless this stack builds its kernel from source (`kernel build --stack NAME`)."""
        if self.kernel["from"] != "source":
            raise StackError(
                f"the {self.name} stack builds no kernel: it takes {self.kernel['package']} from its lock "
                f"({self.kernel['why']})",
                f"install the stack with `{self.sync_command('VENV')}`; `kernel build` is for the stacks that build "
                f"theirs: {', '.join(n for n in names() if load(n).kernel['from'] == 'source')}",
            )

    def sync_command(self, venv: str | Path) -> str:
        """The one command that installs the lock into a venv (keeping a source-built kernel there)."""
        return f"UV_PROJECT_ENVIRONMENT={venv} uv sync --frozen --inexact --project {self.path}"

    def missing_lock_message(self) -> str:
        """The same text lib/stacks.nix throws for a stack without a lock."""
        reason = self.data["lock"].get("missing_reason")
        return (
            f"blackwell-stack: the {self.name} stack has no lock ({self.relpath}/uv.lock)"
            + (f": {reason}" if reason else ".")
            + f" Make it with: {self.lock_command}"
        )

    def lock(self) -> Lock:
        """The parsed lock (read once while the file stays as it is), or a StackError naming the command that
        makes it."""
        try:
            st = self.lock_path.stat()
        except FileNotFoundError:
            raise StackError(self.missing_lock_message(), f"run `{self.lock_command}`") from None
        state = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._lock is None or self._lock[0] != state:
            self._lock = (state, load_lock(self.lock_path))
        return self._lock[1]

    def target(self) -> wheel_choice.Target:
        """The platform the stack is realized on (its system and Python)."""
        machine = self.system.split("-")[0]
        major, minor = (int(x) for x in self.python.split("."))
        return wheel_choice.Target(machine=machine, python=(major, minor))

    def chosen_wheels(self, lock: Lock | None = None) -> dict[str, tuple[LockedPackage, dict]]:
        """{package: (package, the wheel both realizations install on the stack's target)}."""
        lock = lock or self.lock()
        chosen = {}
        for pkg in lock.packages.values():
            if pkg.source.get("virtual") or pkg.source.get("editable"):
                continue
            wheel = wheel_choice.uv_choice(pkg, self.target())
            if wheel is None:
                raise StackError(f"{pkg.name} {pkg.version} has no wheel for {self.system} / CPython {self.python} "
                                 f"in {self.relpath}/uv.lock", "the stacks are wheel-only: pin a version that publishes one")
            chosen[pkg.name] = (pkg, wheel)
        return chosen

    def local_wheel(self, package: LockedPackage, wheel: dict) -> Path | None:
        """A wheel the lock takes from a local index (`source = { registry = "wheels/simple" }`), or None."""
        registry = package.source.get("registry", "")
        if "path" not in wheel or "://" in registry:
            return None
        return (self.path / registry / wheel["path"]).resolve()

    def versions(self, lock: Lock | None = None) -> dict[str, str]:
        """{"sglang", "flashinfer", "torch"} as the lock has them (never typed twice)."""
        lock = lock or self.lock()
        out = {}
        for key, package in self.data["versions_from_lock"].items():
            pkg = lock.get(package)
            if pkg is None or pkg.version is None:
                raise DataError(self.lock_path, package, "version",
                                f"stack.json reads the {key} version from {package}, which the lock does not have",
                                f"fix versions_from_lock in {self.relpath}/stack.json, or lock again: {self.lock_command}")
            out[key] = pkg.version
        return out


def names() -> list[str]:
    """Every stack, in the one order every command lists them: the default first, then the others by name."""
    found = _names_on_disk()
    try:
        first = default_name()
    except StackError:  # no single default: the order of names, and the command that needs one says why
        return found
    return [first, *(n for n in found if n != first)]


def _names_on_disk() -> list[str]:
    """Every stack (a directory of stacks/ with a stack.json), sorted."""
    return sorted(p.parent.name for p in registry.entry("stack").files())


def load(name: str | None = None) -> Stack:
    """The stack `name` (stacks/<name>/stack.json, validated); None: the default stack."""
    if name is None:
        name = default_name()
    if not _NAME.match(name or ""):
        raise StackError(f"{name!r} is not a stack name", f"stacks: {', '.join(names()) or 'none'}")
    path = data_path(STACKS_DIR) / name
    meta = path / "stack.json"
    if not meta.is_file():
        raise StackError(f"there is no stack {name!r} ({STACKS_DIR}/{name}/stack.json)",
                         f"pick one of: {', '.join(names()) or 'none'}")
    data = registry.load("stack", file=meta)
    if data["name"] != name:  # the file names its own directory (the check beside the shape, schemas.STACK)
        raise DataError(meta, None, "name", f"must be the directory name {name!r}, found {data['name']!r}",
                        "fix the stack's stack.json (docs/stacks.md)")
    return Stack(name, path, data)


def default_name() -> str:
    defaults = [n for n in _names_on_disk() if load(n).default]
    if len(defaults) != 1:
        raise StackError(f"{len(defaults)} stacks say \"default\": true ({', '.join(defaults) or 'none'})",
                         "exactly one stacks/<name>/stack.json must be the default")
    return defaults[0]


def select(arg: str | None) -> list[Stack]:
    """`--stack NAME` (or `all`) as the stacks it names; without one, the default stack."""
    return [load(n) for n in names()] if arg == "all" else [load(arg)]

