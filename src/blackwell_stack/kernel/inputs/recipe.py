"""The sgl-kernel build recipe (pkgs/sgl-kernel/recipe.json) as CMake defines and environment.

lib/kernel-recipe.nix computes the same from the same JSON; tests compare the two on the real recipe and on
generated ones. Rules shared by both sides:
- defines = cmake_defines, then every name in arch_defines set to the architecture list, then the planned defines
  (nvcc threads) when a plan is given;
- flags are `-DNAME=VALUE`, sorted by name;
- environment = environment, then arch_environment set to the architecture list, then the planned environment (jobs)
  when a plan is given;
- a plain target from compute capability arch_specific_from_major on (9.0, 10.0, 12.0) is refused: sgl-kernel's
  Hopper and Blackwell CUTLASS kernels exist only in the architecture-specific target (9.0a, ...), and a plain build
  returns wrong numbers from them without an error (the recipe's arch_specific_note cites upstream);
- an architecture outside supported_archs is refused, naming the valid ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from blackwell_stack.data import registry
from blackwell_stack.errors import DataError, StackError
from blackwell_stack.kernel import jobs

# A CUDA capability as patch 0005 reads it: "9.0", "12.0a", "10.0f" (major, minor, suffix).
_CAPABILITY = re.compile(r"(0|[1-9][0-9]*)\.([0-9]+)([af]?)")


def load(path: str | Path | None = None) -> dict:
    return registry.load("recipe", file=path, check=_check_archs_and_memory)  # the shape: the registry's


def _check_archs_and_memory(data: dict, path: str | Path) -> None:
    for plain in plain_targets(data, data["supported_archs"]):
        raise DataError(path, plain, "supported_archs", "lists a plain target from compute capability "
                        f"{data['arch_specific_from_major']} on", f"list {plain}a instead (arch_specific_note says why)")
    # The memory rule is checked by the one implementation that applies it (jobs.py, which the
    # Nix derivation runs as a bare script), so both front ends refuse the same recipes.
    for field, problem in jobs.memory_problems(data.get("memory")):
        raise DataError(path, "memory", field, problem, "measured figures in MiB: benchmarks/kernel-compile-memory/")


arch_list = jobs.arch_list  # "12.0a" / "10.0a;12.0a" / ["12.0a"] -> ["12.0a", ...]; the Nix build's jobs.py reads it too


def plain_targets(recipe: Mapping, archs: Sequence[str]) -> list[str]:
    """The targets of archs that lack their architecture-specific suffix from arch_specific_from_major on ("9.0", not "9.0a")."""
    start = recipe["arch_specific_from_major"]
    parsed = [(arch, _CAPABILITY.fullmatch(arch)) for arch in archs]
    return [arch for arch, m in parsed if m and not m.group(3) and int(m.group(1)) >= start]


def check_archs(recipe: Mapping, archs: str | Sequence[str]) -> str:
    """The ;-joined list for SGL_KERNEL_CUDA_ARCHS, or a StackError: a plain Hopper/Blackwell target, or one not supported."""
    wanted = arch_list(archs)
    valid = recipe["supported_archs"]
    plain = plain_targets(recipe, wanted)
    if wanted and plain:
        raise StackError(
            f"plain CUDA architecture {', '.join(plain)} refused: from compute capability "
            f"{recipe['arch_specific_from_major']} on, sgl-kernel's CUTLASS kernels exist only in the architecture-specific "
            f"target, and a plain one builds them as stubs that return wrong numbers without an error; use "
            f"{', '.join(a + 'a' for a in plain)}",
            "pass --arch 9.0a for H100/H200, 10.0a for B200, 12.0a for RTX PRO 6000 Blackwell "
            "(pkgs/sgl-kernel/recipe.json arch_specific_note cites upstream)",
        )
    unknown = [a for a in wanted if a not in valid]
    if not wanted or unknown:
        raise StackError(
            f"unknown CUDA architecture {', '.join(unknown) or '(none given)'}; valid: {', '.join(valid)}",
            "pass --arch 12.0a for RTX PRO 6000 Blackwell (SM120); several as --arch 10.0a;12.0a",
        )
    return ";".join(wanted)


def _layered(recipe: Mapping, tables: tuple[str, str, str], archs, planned: Mapping[str, str] | None) -> dict[str, str]:
    """The recipe's fixed settings, then the target architectures, then the planned job counts (`tables` names
    the recipe's three tables of them)."""
    fixed, arch_names, planned_names = tables
    arch = check_archs(recipe, archs if archs is not None else recipe["arch"])
    out = dict(recipe[fixed])
    out.update(dict.fromkeys(recipe[arch_names], arch))
    if planned:
        out.update({name: str(planned[name]) for name in recipe[planned_names] if name in planned})
    return out


def defines(recipe: Mapping, archs: str | Sequence[str] | None = None, planned: Mapping[str, str] | None = None) -> dict[str, str]:
    return _layered(recipe, ("cmake_defines", "arch_defines", "planned_defines"), archs, planned)


def cmake_flags(recipe: Mapping, archs: str | Sequence[str] | None = None, planned: Mapping[str, str] | None = None) -> list[str]:
    return [f"-D{name}={value}" for name, value in sorted(defines(recipe, archs, planned).items())]


def environment(recipe: Mapping, archs: str | Sequence[str] | None = None, planned: Mapping[str, str] | None = None) -> dict[str, str]:
    return _layered(recipe, ("environment", "arch_environment", "planned_environment"), archs, planned)
