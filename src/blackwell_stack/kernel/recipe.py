"""The sgl-kernel build recipe (pkgs/sgl-kernel/recipe.json) as CMake defines and environment.

lib/kernel-recipe.nix computes the same from the same JSON; tests compare the
two on the real recipe and on generated ones. Rules shared by both sides:
- defines = cmake_defines, then every name in arch_defines set to the
  architecture list, then the planned defines (nvcc threads) when a plan is given;
- flags are `-DNAME=VALUE`, sorted by name;
- environment = environment, then arch_environment set to the architecture
  list, then the planned environment (jobs) when a plan is given;
- an architecture outside supported_archs is refused, naming the valid ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from blackwell_stack.errors import DataError, StackError
from blackwell_stack.kernel import jobs
from blackwell_stack.model import registry

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def recipe_path() -> Path:
    return registry.path("recipe")


def load(path: str | Path | None = None) -> dict:
    return registry.load("recipe", file=path, check=validate)


def validate(data: object, path: str | Path = "recipe.json") -> None:
    """Raise DataError naming the field for anything lib/kernel-recipe.nix could not render."""
    if not isinstance(data, dict):
        raise DataError(path, None, None, "the recipe must be a JSON object")
    for field in ("cmake_defines", "environment"):
        table = data.get(field)
        if not isinstance(table, dict):
            raise DataError(path, None, field, "must be an object of NAME: \"VALUE\" strings")
        for name, value in table.items():
            if not _NAME.match(name):
                raise DataError(path, name, field, "is not a CMake/environment variable name", "use letters, digits and _")
            if not isinstance(value, str):
                raise DataError(path, name, field, f"value {value!r} is not a string", 'write it as a string, e.g. "ON"')
    for field in ("arch_defines", "arch_environment", "planned_defines", "planned_environment", "supported_archs"):
        items = data.get(field)
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise DataError(path, None, field, "must be a list of non-empty strings")
    for field in ("arch_defines", "arch_environment", "planned_defines", "planned_environment"):
        for name in data[field]:
            if not _NAME.match(name):
                raise DataError(path, name, field, "is not a CMake/environment variable name")
    arch = data.get("arch")
    if not isinstance(arch, str) or not arch:
        raise DataError(path, None, "arch", "must be a non-empty string such as \"12.0a\"")
    # The memory rule is checked by the one implementation that applies it (jobs.py, which the
    # Nix derivation runs as a bare script), so both front ends refuse the same recipes.
    for field, problem in jobs.memory_problems(data.get("memory")):
        raise DataError(path, "memory", field, problem, "measured figures in MiB: benchmarks/kernel-compile-memory/")


def arch_list(archs: str | Sequence[str]) -> list[str]:
    """ "12.0a" / "10.0a;12.0a" / ["12.0a"] -> ["12.0a", ...]"""
    if isinstance(archs, str):
        archs = archs.replace(",", ";").split(";")
    return [a.strip() for a in archs if a.strip()]


def check_archs(recipe: Mapping, archs: str | Sequence[str]) -> str:
    """The ;-joined list for SGL_KERNEL_CUDA_ARCHS, or a StackError listing the valid architectures."""
    wanted = arch_list(archs)
    valid = recipe["supported_archs"]
    unknown = [a for a in wanted if a not in valid]
    if not wanted or unknown:
        raise StackError(
            f"unknown CUDA architecture {', '.join(unknown) or '(none given)'}; valid: {', '.join(valid)}",
            "pass --arch 12.0a for RTX PRO 6000 Blackwell (SM120); several as --arch 10.0a;12.0a",
        )
    return ";".join(wanted)


def _layered(recipe: Mapping, kind: str, archs, planned: Mapping[str, str] | None) -> dict[str, str]:
    """The recipe's fixed `kind` settings, then the target architectures, then the planned job counts.

    kind "cmake" reads cmake_defines/arch_defines/planned_defines; "env" the
    environment/arch_environment/planned_environment tables.
    """
    fixed, arch_names, planned_names = {
        "cmake": ("cmake_defines", "arch_defines", "planned_defines"),
        "env": ("environment", "arch_environment", "planned_environment"),
    }[kind]
    arch = check_archs(recipe, archs if archs is not None else recipe["arch"])
    out = dict(recipe[fixed])
    out.update(dict.fromkeys(recipe[arch_names], arch))
    if planned:
        out.update({name: str(planned[name]) for name in recipe[planned_names] if name in planned})
    return out


def defines(recipe: Mapping, archs: str | Sequence[str] | None = None, planned: Mapping[str, str] | None = None) -> dict[str, str]:
    return _layered(recipe, "cmake", archs, planned)


def cmake_flags(recipe: Mapping, archs: str | Sequence[str] | None = None, planned: Mapping[str, str] | None = None) -> list[str]:
    return [f"-D{name}={value}" for name, value in sorted(defines(recipe, archs, planned).items())]


def environment(recipe: Mapping, archs: str | Sequence[str] | None = None, planned: Mapping[str, str] | None = None) -> dict[str, str]:
    return _layered(recipe, "env", archs, planned)


def skbuild_config_settings(recipe: Mapping, archs=None, planned=None) -> list[str]:
    """`pip wheel -C ...` / `python -m build -C...` arguments that pass the defines to scikit-build-core."""
    return [f"cmake.define.{name}={value}" for name, value in sorted(defines(recipe, archs, planned).items())]
