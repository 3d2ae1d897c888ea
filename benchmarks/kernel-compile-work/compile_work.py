"""Benchmark (not a command): device compilations of upstream's default sgl-kernel build against the recipe.

    python benchmarks/kernel-compile-work/compile_work.py [--src CHECKOUT] [--arch 12.0a] [--json]

Device compile work is counted as CUDA translation units x target
architectures x library variants, per CMake target. The translation units
come from the checkout's CMakeLists.txt and cmake/flashmla.cmake (`--src`), or
from compile-units.json beside this file, a record of the same lists at the
pinned tag. Upstream's architecture sets are data too (they depend on CMake
conditionals on the CUDA version and the processor: docs/sgl-kernel.md, x86-64,
CUDA 13, default options); the recipe's follow patch 0005's rules.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "src"))

from blackwell_stack import inputfiles, output  # noqa: E402
from blackwell_stack.data import shape  # noqa: E402
from blackwell_stack.data.shape import Bool, Int, ListOf, Literal, Map, Obj, Str  # noqa: E402
from blackwell_stack.errors import DataError  # noqa: E402
from blackwell_stack.kernel.inputs import patch_series, recipe  # noqa: E402

UNITS = HERE / "compile-units.json"
_NAMES = ListOf(Str(nonempty=True))
SHAPE = Obj({
    "schema_version": Literal((1,)),
    "source": Str(),
    "upstream_arch_sets": Map(_NAMES),
    "targets": Map(Obj({"sources": _NAMES, "arch_set": Str(nonempty=True), "enabled_upstream": Bool()},
                       optional={"variants_upstream": _NAMES, "globbed_cuda_units_upstream": Map(Int(minimum=0)),
                                 "globbed_cuda_units_recipe_fa3_on": Map(Int(minimum=0))}), nonempty=True),
})

GOAL = 1 / 8  # issue 3: the SM120 recipe needs at most 1/8 of upstream's device compilations

# CMake list variables holding each target's sources, and the file that sets them.
SOURCE_VARIABLES = {
    "common_ops": ("CMakeLists.txt", "SOURCES"),
    "spatial_ops": ("CMakeLists.txt", "SPATIAL_SOURCES"),
    "flash_ops": ("CMakeLists.txt", "FLASH_SOURCES"),
    "flashmla_ops": ("cmake/flashmla.cmake", "FlashMLA_SOURCES"),
    "deep_gemm_cpp": ("CMakeLists.txt", "DEEPGEMM_SOURCES"),
}


def _strip_comments(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("#") else "" for line in text.splitlines())


def cmake_set(text: str, name: str) -> list[str] | None:
    """Items of the first `set(NAME item ...)` in CMake text (quotes removed), or None if absent."""
    m = re.search(r"\bset\s*\(\s*" + re.escape(name) + r"\b(.*?)\)", _strip_comments(text), re.DOTALL)
    if not m:
        return None
    return [item.strip('"') for item in re.findall(r'"[^"]*"|\S+', m.group(1))]


def is_cuda(source: str) -> bool:
    return source.endswith(".cu")


def sources_from_checkout(src: str | Path) -> dict[str, list[str]]:
    kdir = patch_series.kernel_dir(src)
    out = {}
    for target, (rel, var) in SOURCE_VARIABLES.items():
        path = kdir / rel
        items = cmake_set(inputfiles.read_text(path, limit=inputfiles.TEXT_FILE_LIMIT), var) if path.is_file() else None
        if items is None:
            raise DataError(path, target, var, f"no set({var} ...) found", "is this the pinned sgl-kernel (sglang v0.5.9)?")
        # FLASH_SOURCES also lists "${FA3_GEN_SRCS}", the globbed instantiations counted from the data file.
        out[target] = [i for i in items if not i.startswith("${") or not i.endswith("}")]
    return out


def load_data(path: Path = UNITS) -> dict:
    """compile-units.json, checked: its shape, and each target's arch set is one of upstream's."""
    data = json.loads(inputfiles.read_text(path, limit=inputfiles.DATA_FILE_LIMIT))
    shape.check(SHAPE, data, path)
    for target, spec in data["targets"].items():
        if spec["arch_set"] not in data["upstream_arch_sets"]:
            raise DataError(path, f"targets.{target}", "arch_set",
                            f"{spec['arch_set']!r} is not one of upstream_arch_sets: {', '.join(data['upstream_arch_sets'])}")
    return data


@dataclass
class TargetWork:
    target: str
    cuda_units: int
    archs: list[str]
    variants: list[str]

    @property
    def compilations(self) -> int:
        return self.cuda_units * len(self.archs) * len(self.variants)


def upstream_work(data: Mapping, sources: Mapping[str, Sequence[str]]) -> list[TargetWork]:
    sets = data["upstream_arch_sets"]
    out = []
    for target, spec in data["targets"].items():
        if not spec["enabled_upstream"]:
            continue
        units = sum(1 for s in sources[target] if is_cuda(s)) + sum(spec.get("globbed_cuda_units_upstream", {}).values())
        out.append(TargetWork(target, units, list(sets[spec["arch_set"]]), list(spec.get("variants_upstream", ["-"]))))
    return out


def recipe_work(data: Mapping, sources: Mapping[str, Sequence[str]], rec: Mapping, archs: str | None = None) -> list[TargetWork]:
    """Patch 0005's rules: the listed archs for common_ops/spatial_ops; sm90 library only for 9.x,
    sm100 library for the rest; FlashMLA (its own arch set) only if 9.0a/10.0a/10.3a is listed;
    flash_ops only with SGL_KERNEL_ENABLE_FA3=ON."""
    wanted = recipe.arch_list(recipe.check_archs(rec, archs or rec["arch"]))
    defines = rec["cmake_defines"]
    out = []
    for target, spec in data["targets"].items():
        cuda_units = sum(1 for s in sources[target] if is_cuda(s))
        if target == "common_ops":
            variants = (["sm90"] if any(a.startswith("9.") for a in wanted) else []) + (
                ["sm100"] if any(not a.startswith("9.") for a in wanted) else []
            )
            out.append(TargetWork(target, cuda_units, wanted, variants))
        elif target == "spatial_ops":
            out.append(TargetWork(target, cuda_units, wanted, ["-"]))
        elif target == "flashmla_ops":
            on = any(a in ("9.0a", "10.0a", "10.3a") for a in wanted)
            out.append(TargetWork(target, cuda_units, list(data["upstream_arch_sets"]["flashmla"]) if on else [], ["-"]))
        elif target == "flash_ops":
            on = defines.get("SGL_KERNEL_ENABLE_FA3", "OFF").upper() in ("ON", "1", "TRUE", "YES")
            units = cuda_units + sum(spec.get("globbed_cuda_units_recipe_fa3_on", {}).values())
            out.append(TargetWork(target, units, list(data["upstream_arch_sets"]["fa3_recipe"]) if on else [], ["-"]))
        else:
            out.append(TargetWork(target, cuda_units, wanted if cuda_units else [], ["-"]))
    return out


@dataclass
class WorkComparison:
    upstream: list[TargetWork]
    recipe: list[TargetWork]
    source_note: str

    @property
    def upstream_total(self) -> int:
        return sum(t.compilations for t in self.upstream)

    @property
    def recipe_total(self) -> int:
        return sum(t.compilations for t in self.recipe)

    @property
    def ratio(self) -> float:
        return self.recipe_total / self.upstream_total if self.upstream_total else 0.0

    @property
    def meets_goal(self) -> bool:
        return self.ratio <= GOAL

    def ratio_text(self) -> str:
        if not self.recipe_total:
            return "0"
        return f"1/{self.upstream_total / self.recipe_total:.1f}"

    def to_json(self) -> dict:
        def rows(work):
            return [
                {"target": t.target, "cuda_units": t.cuda_units, "archs": t.archs, "variants": t.variants, "compilations": t.compilations}
                for t in work
            ]

        return {
            "sources": self.source_note,
            "upstream": rows(self.upstream),
            "recipe": rows(self.recipe),
            "upstream_total": self.upstream_total,
            "recipe_total": self.recipe_total,
            "ratio": round(self.ratio, 4),
            "ratio_text": self.ratio_text(),
            "goal": "<= 1/8",
            "meets_goal": self.meets_goal,
        }


def compare(src: str | Path | None = None, archs: str | None = None) -> WorkComparison:
    data = load_data()
    rec = recipe.load()
    if src is not None:
        sources = sources_from_checkout(src)
        note = (
            f"translation units parsed from {patch_series.kernel_dir(src)} (CMakeLists.txt, cmake/flashmla.cmake); "
            f"FA3's globbed instantiations and upstream's architecture sets from {UNITS.name}"
        )
    else:
        sources = {t: spec["sources"] for t, spec in data["targets"].items()}
        note = f"no --src: translation units from {UNITS.name} ({data['source']})"
    return WorkComparison(upstream_work(data, sources), recipe_work(data, sources, rec, archs), note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=None, help="sglang checkout or its sgl-kernel directory (default: the recorded lists)")
    parser.add_argument("--arch", default=None, help="target architectures of the recipe side (default: the recipe's)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    cmp = compare(args.src, args.arch)
    if args.json:
        output.dump_json(cmp.to_json())
        return 0
    output.heading("sgl-kernel device compilations: upstream defaults vs the recipe")
    print(cmp.source_note)
    rows = []
    recipe_by_target = {t.target: t for t in cmp.recipe}
    for up in cmp.upstream:
        rc = recipe_by_target.get(up.target)
        rows.append([
            up.target, up.cuda_units, f"{len(up.archs)} x {len(up.variants)}", up.compilations,
            f"{len(rc.archs)} x {len(rc.variants)}" if rc and rc.compilations else "off", rc.compilations if rc else 0,
        ])
    output.table(["target", ".cu units", "upstream archs x variants", "upstream", "recipe archs x variants", "recipe"], rows)
    verdict = "meets" if cmp.meets_goal else "MISSES"
    print(f"\ntotal: upstream {cmp.upstream_total}, recipe {cmp.recipe_total} device compilations: "
          f"ratio {cmp.ratio_text()} ({verdict} the goal of at most 1/8)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
