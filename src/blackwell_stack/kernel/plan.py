"""The sgl-kernel for SM120 section of `blackwell-stack plan`: source pin, patches, recipe, job plan."""

from __future__ import annotations

import sys

from blackwell_stack.data.plan import PlanItem, PlanSection, hash_checked_by
from blackwell_stack.data.stack import Stack
from blackwell_stack.kernel import jobs
from blackwell_stack.kernel.build import toolchain
from blackwell_stack.kernel.inputs import patch_series, recipe
from blackwell_stack.kernel.inputs import sources as kernel_sources


def plan_section(stacks: list[Stack]) -> PlanSection | None:
    """The source build, when one of the stacks shown builds its sgl-kernel (the others take theirs from the lock)."""
    builders = [s.name for s in stacks if s.kernel["from"] == "source"]
    if not builders:
        return None
    sec = PlanSection(key="kernel", title=f"sgl-kernel for SM120, built from source (stacks: {', '.join(builders)})")
    sources = kernel_sources.load()
    sg = sources["sglang"]
    sec.items.append(PlanItem(
        "sglang source (sourceRoot sgl-kernel)",
        f"{sg['owner']}/{sg['repo']} {sg['tag']} ({sg['rev'][:12]}), sgl-kernel {sg['sgl_kernel_version']}",
        sg.get("hash_source"), bool(sg.get("verified")), sg.get("reason"), hash_checked_by(sg["hash_checked"]),
    ))
    for name, dep in sources.get("fetchcontent", {}).items():
        where = f"{dep.get('owner')}/{dep.get('repo')}@{str(dep.get('rev'))[:12]}"
        sec.items.append(PlanItem(f"FetchContent {name}", where, dep.get("hash_source"), bool(dep.get("verified")),
                                  dep.get("reason") if not dep.get("verified") else None,
                                  hash_checked_by(dep["hash_checked"])))
    for patch in patch_series.load_series():
        sec.items.append(PlanItem(f"patch {patch.name[:4]}", next((line.strip() for line in patch.description.splitlines() if line.strip()), ""), str(patch.path.name)))
    rec = recipe.load()
    sec.items.append(PlanItem("recipe cmake flags", " ".join(recipe.cmake_flags(rec)), "pkgs/sgl-kernel/recipe.json"))
    env = recipe.environment(rec)
    sec.items.append(PlanItem("recipe environment", " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "-",
                              "pkgs/sgl-kernel/recipe.json"))
    mem = rec["memory"]
    sec.items.append(PlanItem(
        "memory of one compile",
        f"largest {mem['per_nvcc_thread_peak_mib']} MiB; {len(mem.get('unit_peaks_mib', {}))} units listed, "
        f"others {mem.get('unlisted_unit_peak_mib', mem['per_nvcc_thread_peak_mib'])} MiB",
        mem["provenance"],
    ))
    try:
        host = jobs.read_host()
        jp = jobs.recipe_plan(rec, rec["arch"], host, pools=jobs.cmake_has_pools(toolchain.check_cmake(sys.executable).value))
        pool = f", heavy units {jp.heavy_jobs} at a time" if jp.heavy_jobs else ""
        hint = (f"{jp.jobs} job(s) x {jp.threads} nvcc thread(s){pool} here ({host.cores} cores, "
                f"{host.available_mib} MiB available): planned peak {jp.planned_peak_mib} MiB")
    except (jobs.DoesNotFit, OSError) as exc:
        hint = f"does not fit on this host: {exc}"
    sec.items.append(PlanItem("job plan (decided again at build time)", hint, "src/blackwell_stack/kernel/jobs.py"))
    sec.commands += [
        "blackwell-stack kernel patches check --src ./sglang",
        "blackwell-stack kernel build --src ./sglang --out dist/",
        "nix build .#sgl-kernel-wheel",
    ]
    return sec
