"""Which of upstream's kernel tests apply to a wheel on this host: `kernel test`'s selection.

The target is what the interpreter that runs the tests reports (target_probe.py). The rules are data
(pkgs/sgl-kernel/kernel-tests.json): a file runs unless a rule or a missing import says why not, and that
reason is reported with the skip.
"""

from __future__ import annotations

import ast
import json
import os
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack import inputfiles, proc
from blackwell_stack.data import registry
from blackwell_stack.errors import DataError, StackError, ToolchainError

_CAPABILITY = re.compile(r"^(\d+)\.(\d+)$")
_ARCH = re.compile(r"^(\d+)\.(\d+)([af]?)$")


def load_rules(path: str | Path | None = None) -> dict[str, Any]:
    """kernel-tests.json, checked; DataError names the entry and field that is wrong."""
    return registry.load("kernel-tests", file=path, check=_check_project_checks)


def _check_project_checks(data: dict[str, Any], path: Path) -> None:
    for name in data["project_checks"]:
        if not name.endswith(".py") or not project_check_path(name).is_file():
            raise DataError(path, f"project_checks.{name}", None, "names no script in pkgs/sgl-kernel/", "fix the name")


def project_check_path(name: str) -> Path:  # name: "gpu_check.py"
    return registry.path("kernel-check", name.removesuffix(".py"))


def runs_on(arch: str, capability: str) -> bool:
    """Whether a cubin for `arch` ("9.0a", "8.0") runs on a GPU of `capability` ("9.0").

    The rule of load_utils.py after patch 0005: an a target runs only on its
    own capability, a plain one on its major version from its minor up.
    """
    a, c = _ARCH.match(arch), _CAPABILITY.match(capability)
    if a is None or c is None:
        return False
    if a.group(3):
        return (a.group(1), a.group(2)) == (c.group(1), c.group(2))
    return a.group(1) == c.group(1) and int(c.group(2)) >= int(a.group(2))


@dataclass(frozen=True)
class Target:
    """The host and wheel the tests run against, as the probe (or --gpu) saw them."""

    python: str
    gpus: tuple[str, ...]  # capability of each GPU, "9.0"
    gpu_names: tuple[str, ...]
    torch: str | None
    wheel_archs: tuple[str, ...] | None  # None: built with upstream's list (no _build_archs.py)
    libraries: tuple[str, ...]
    package_dir: str
    modules: Mapping[str, bool]

    @property
    def capability(self) -> str:
        return self.gpus[0]

    @property
    def runnable_archs(self) -> list[str]:
        """The wheel's architectures whose cubins run on the first GPU (upstream's list: the GPU's own a target)."""
        if self.wheel_archs is None:
            return [self.capability + "a"]
        return [a for a in self.wheel_archs if runs_on(a, self.capability)]

    def to_json(self) -> dict[str, Any]:
        return {"python": self.python, "gpus": [{"name": n, "capability": c} for n, c in zip(self.gpu_names, self.gpus)],
                "torch": self.torch, "wheel_archs": list(self.wheel_archs) if self.wheel_archs is not None else None,
                "runnable_archs": self.runnable_archs, "libraries": list(self.libraries), "sgl_kernel": self.package_dir,
                "missing_modules": sorted(m for m, ok in self.modules.items() if not ok)}


def probe(python: str, modules: Iterable[str], env: Mapping[str, str], gpu: str | None = None) -> Target:
    """What `python` has, with `env` (which puts a wheel under test on its path); `gpu`: a capability to choose
    tests for instead of the GPUs torch sees."""
    script = Path(__file__).with_name("target_probe.py").read_text()
    result = proc.run([python, "-c", script, *sorted(set(modules))], env=env, check=False, timeout=300, cwd=os.sep)
    try:
        facts = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = "\n".join(result.stderr.strip().splitlines()[-10:])
        raise ToolchainError(f"{python} could not report its environment (exit code {result.returncode}):\n{tail}",
                             "pass --python with the interpreter of the venv that has torch and sgl-kernel") from None
    kernel = facts.get("sgl_kernel")
    if kernel is None:
        raise StackError(f"sgl_kernel is not installed for {python}",
                         "pass --wheel with the wheel to test, or --python with the venv that has it")
    if gpu is not None:
        gpus, names = (gpu,), (f"given by --gpu {gpu}",)
    else:
        if facts.get("torch") is None:
            raise ToolchainError(f"torch cannot be imported by {python}: {facts.get('torch_error')}",
                                 "pass --python with the interpreter of the venv that has the stack's torch")
        if not facts["gpus"]:
            raise ToolchainError(f"no CUDA GPU is visible to torch {facts['torch']} in {python}",
                                 "run it on the host that will serve, where nvidia-smi lists the GPUs")
        gpus = tuple(g["capability"] for g in facts["gpus"])
        names = tuple(g["name"] for g in facts["gpus"])
    archs = kernel["archs"]
    return Target(python, gpus, names, facts.get("torch"), tuple(archs) if archs is not None else None,
                  tuple(kernel["libraries"]), kernel["dir"], facts["modules"])


def _imported_modules(path: Path, local: set[str]) -> set[str]:
    try:
        tree = ast.parse(inputfiles.read_bytes(path, limit=inputfiles.TEXT_FILE_LIMIT), filename=str(path))
    except (SyntaxError, ValueError):
        return set()  # pytest reports it as a collection error
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - local - {"__future__"}


@dataclass(frozen=True)
class Item:
    """One program to run: an upstream test file (under pytest) or a project check (a script)."""

    name: str
    path: Path
    kind: str  # "pytest" or "script"
    skip: str | None = None


def _skip_reason(rule: Mapping[str, Any], target: Target, missing: Sequence[str]) -> str | None:
    if "skip" in rule:
        return str(rule["skip"])
    why = rule.get("why", "")
    gpus = rule.get("needs_gpus", 1)
    if len(target.gpus) < gpus:
        return f"needs {gpus} GPUs, this host has {len(target.gpus)}: {why}"
    absent = [lib for lib in rule.get("needs_libraries", []) if lib not in target.libraries]
    if absent:
        return f"the wheel has no {', '.join(absent)}: {why}"
    wanted = rule.get("needs_archs")
    runnable = target.runnable_archs
    if wanted and not set(wanted) & set(runnable):
        return (f"tests kernels for {', '.join(wanted)}; the wheel runs {', '.join(runnable) or 'nothing'} on this "
                f"GPU ({target.capability}): {why}")
    if missing:
        return f"imports {', '.join(missing)}, not installed for {target.python}"
    return None


def chosen(tests_dir: Path, rules: Mapping[str, Any],
           only: Sequence[str] | None = None) -> tuple[dict[str, set[str]], list[str]]:
    """({test file: the modules it imports at module level}, project checks): all of them (test_*.py under
    tests_dir), or those named in `only`, in that order. The test directory's own modules are not imports."""
    files = sorted(p.relative_to(tests_dir).as_posix() for p in tests_dir.rglob("test_*.py") if p.is_file())
    checks = sorted(rules["project_checks"])
    if only:
        unknown = [n for n in only if n not in files and n not in checks]
        if unknown:
            example = files[0] if files else "test_norm.py"
            raise StackError(f"no test file {', '.join(unknown)} in {tests_dir}",
                             f"name files as listed there, e.g. {example}, or {', '.join(checks)}")
        files, checks = [n for n in only if n in files], [n for n in only if n in checks]
    local = {p.stem for p in tests_dir.rglob("*.py")} | {p.name for p in tests_dir.rglob("*") if p.is_dir()}
    return {name: _imported_modules(tests_dir / name, local) for name in files}, checks


def select(tests_dir: Path, rules: Mapping[str, Any], target: Target, imports: Mapping[str, set[str]],
           checks: Iterable[str]) -> list[Item]:
    items = []
    for name, found in imports.items():
        missing = sorted(m for m in found if not target.modules.get(m, True))
        items.append(Item(name, tests_dir / name, "pytest", _skip_reason(rules["files"].get(name, {}), target, missing)))
    for name in checks:
        rule = rules["project_checks"][name]
        items.append(Item(name, project_check_path(name), "script", _skip_reason(rule, target, [])))
    return items


def unpack_wheel(wheel: str | Path, dest: Path) -> Path:
    """The wheel's files under dest, importable with dest on the path (a wheel is a zip of its site-packages
    layout; nothing is compiled or installed). Refuses what is not an sgl_kernel wheel."""
    wheel = Path(wheel)
    if not wheel.is_file():
        raise StackError(f"--wheel {wheel} is not a file", "pass the .whl that `kernel build` printed")
    try:
        with zipfile.ZipFile(wheel) as zf:
            if not any(n.startswith("sgl_kernel/") for n in zf.namelist()):
                raise StackError(f"{wheel} holds no sgl_kernel package", "pass an sgl-kernel wheel")
            zf.extractall(dest)  # zipfile drops absolute names and '..' itself (zipfile docs)
    except (zipfile.BadZipFile, OSError) as exc:
        raise StackError(f"cannot read the wheel {wheel}: {exc}", "pass the .whl that `kernel build` printed") from None
    return dest
