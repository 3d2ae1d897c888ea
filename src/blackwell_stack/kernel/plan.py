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
    pins = {"sglang source (sourceRoot sgl-kernel)": (sg, f"{sg['owner']}/{sg['repo']} {sg['tag']} "
                                                          f"({sg['rev'][:12]}), sgl-kernel {sg['sgl_kernel_version']}")}
    pins.update({f"FetchContent {name}": (dep, f"{dep.get('owner')}/{dep.get('repo')}@{str(dep.get('rev'))[:12]}")
                 for name, dep in sources.get("fetchcontent", {}).items()})
    sec.items = [PlanItem(name, value, pin.get("hash_source"), bool(pin.get("verified")),
                          None if pin.get("verified") else pin.get("reason"), hash_checked_by(pin["hash_checked"]))
                 for name, (pin, value) in pins.items()]
    sec.items += [PlanItem(f"patch {patch.name[:4]}", patch.description.partition("\n")[0].strip(), patch.path.name)
                  for patch in patch_series.load_series()]
    rec = recipe.load()
    mem = rec["memory"]
    sec.items += [
        PlanItem("recipe cmake flags", " ".join(recipe.cmake_flags(rec)), "pkgs/sgl-kernel/recipe.json"),
        PlanItem("recipe environment", " ".join(f"{k}={v}" for k, v in sorted(recipe.environment(rec).items()))
                 or "-", "pkgs/sgl-kernel/recipe.json"),
        PlanItem("memory of one compile", f"largest {mem['per_nvcc_thread_peak_mib']} MiB; "
                 f"{len(mem.get('unit_peaks_mib', {}))} units listed, others "
                 f"{mem.get('unlisted_unit_peak_mib', mem['per_nvcc_thread_peak_mib'])} MiB", mem["provenance"]),
    ]
    try:
        host = jobs.read_host()
        pools = jobs.cmake_has_pools(toolchain.check_tool("cmake", sys.executable).value)
        jp = jobs.recipe_plan(rec, rec["arch"], host, pools=pools)
        pool = f", heavy units {jp.heavy_jobs} at a time" if jp.heavy_jobs else ""
        hint = (f"{jp.jobs} job(s) x {jp.threads} nvcc thread(s){pool} here ({host.cores} cores, "
                f"{host.available_mib} MiB available): planned peak {jp.planned_peak_mib} MiB")
    except (jobs.DoesNotFit, OSError) as exc:
        hint = f"does not fit on this host: {exc}"
    sec.items.append(PlanItem("job plan (decided again at build time)", hint, "src/blackwell_stack/kernel/jobs.py"))
    sec.commands = [
        "blackwell-stack kernel patches check --src ./sglang",
        "blackwell-stack kernel build --src ./sglang --out dist/",
        "nix build .#sgl-kernel-wheel",
    ]
    return sec
