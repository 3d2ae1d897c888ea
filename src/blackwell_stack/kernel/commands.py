"""`blackwell-stack kernel ...`: the sgl-kernel recipe, patch check, build and compile-work plan."""

from __future__ import annotations

import argparse
import sys

from blackwell_stack import output
from blackwell_stack.errors import ExitCode, ToolchainError
from blackwell_stack.kernel import build, compile_work, patchcheck, recipe


def register(sub: argparse._SubParsersAction) -> None:
    kernel = sub.add_parser("kernel", help="sgl-kernel for SM120: recipe, patches, build without Nix, compile-work plan")
    ksub = kernel.add_subparsers(dest="kernel_command", metavar="SUBCOMMAND")
    ksub.required = True

    p = ksub.add_parser("recipe", help="CMake defines, environment and memory rule of the recipe (pkgs/sgl-kernel/recipe.json)")
    p.add_argument("--arch", default=None, help="target architectures, e.g. 12.0a (default: the recipe's)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_recipe)

    patches = ksub.add_parser("patches", help="the sgl-kernel patch series")
    psub = patches.add_subparsers(dest="patches_command", metavar="SUBCOMMAND")
    psub.required = True
    p = psub.add_parser(
        "check",
        help="dry-run the series against a checkout, hunk by hunk",
        epilog="exit codes: 0 every patch applied or applicable; 1 a hunk conflicts or a patch is half applied; 2 bad --src",
    )
    p.add_argument("--src", required=True, help="sglang checkout or its sgl-kernel directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_patches_check)

    p = ksub.add_parser(
        "build",
        help="build the sgl-kernel wheel from a checkout with the recipe (no Nix)",
        epilog="exit codes: 0 built (or planned, with --dry-run); 2 bad --src or --arch; 6 toolchain wrong or "
        "not enough memory for one job (refused before compiling); 7 the patch series does not apply, or the build failed "
        "(the log's path is printed)",
    )
    p.add_argument("--src", required=True, help="sglang checkout (tag v0.5.9) or its sgl-kernel directory")
    p.add_argument("--arch", default=None, help="target architectures, e.g. 12.0a or 10.0a;12.0a (default: the recipe's)")
    p.add_argument("--out", default="dist", help="directory for the wheel and the build log (default: dist/)")
    p.add_argument("--jobs", type=int, default=None, help="at most this many build jobs (lowered if memory needs)")
    p.add_argument("--job-peak-mib", type=int, default=None, help="override the measured per-job memory peak (MiB)")
    p.add_argument("--python", default=sys.executable, help="the venv's Python that has the stack's torch (default: this one)")
    p.add_argument("--stack", default=None, help="the stack whose torch the kernel is built against (default: the default stack)")
    p.add_argument("--dry-run", action="store_true", help="check and plan everything, change and compile nothing")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_build)

    p = ksub.add_parser("plan", help="device compilations of upstream's defaults against the recipe")
    p.add_argument("--src", default=None, help="sglang checkout or its sgl-kernel directory (default: the recorded lists)")
    p.add_argument("--arch", default=None, help="target architectures of the recipe side (default: the recipe's)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_plan)


def cmd_recipe(args: argparse.Namespace) -> int:
    rec = recipe.load()
    arch = recipe.check_archs(rec, args.arch or rec["arch"])
    data = {
        "arch": arch,
        "cmake_flags": recipe.cmake_flags(rec, arch),
        "defines": recipe.defines(rec, arch),
        "environment": recipe.environment(rec, arch),
        "skbuild_config_settings": recipe.skbuild_config_settings(rec, arch),
        "planned_at_build_time": rec["planned_defines"] + rec["planned_environment"],
        "memory": rec["memory"],
    }
    try:
        host, plan = build.host_job_plan(rec, arch)
        data["job_plan_here"] = {"jobs": plan.jobs, "nvcc_threads": plan.threads, "planned_peak_mib": plan.planned_peak_mib,
                                 "available_mib": host.available_mib, "note": plan.note}
    except ToolchainError as exc:
        data["job_plan_here"] = {"error": exc.message}
    if args.json:
        output.dump_json(data)
        return 0
    output.heading(f"sgl-kernel recipe for {arch} ({recipe.recipe_path()})")
    notes = rec.get("cmake_define_notes", {})
    output.table(["define", "value", "why"], [[k, v, notes.get(k, "")] for k, v in sorted(data["defines"].items())])
    output.heading("environment")
    output.table(["variable", "value"], sorted(data["environment"].items()))
    output.paragraph(f"planned at build time: {', '.join(data['planned_at_build_time'])}")
    output.heading("memory")
    mem = rec["memory"]
    print(f"per nvcc thread: {mem['per_nvcc_thread_peak_mib']} MiB")
    output.paragraph(f"source: {mem['provenance']}")
    output.paragraph(f"rule: {mem['rule']}")
    plan = data["job_plan_here"]
    if "error" in plan:
        print(f"this host: {plan['error']}")
    else:
        output.paragraph(f"this host: {plan['jobs']} job(s) x {plan['nvcc_threads']} nvcc thread(s), planned peak "
                         f"{plan['planned_peak_mib']} MiB of {plan['available_mib']} MiB available ({plan['note']})")
    return 0


def cmd_patches_check(args: argparse.Namespace) -> int:
    report = patchcheck.check_series(args.src)
    if args.json:
        output.dump_json(report.to_json())
        return 0 if report.ok else int(ExitCode.CHECK_FAILED)
    output.heading(f"patch series against {report.kernel_dir}")
    output.table(
        ["patch", "file", "hunk", "state", "line", "offset"],
        [[r.patch, r.file, r.hunk, r.state, r.line, r.offset or ""] for r in report.hunks],
    )
    print()
    for name, state in report.patch_states().items():
        print(f"  {state:<15} {name}")
    conflicts = [r for r in report.hunks if r.state == patchcheck.CONFLICTING]
    for r in conflicts:
        print("\n" + patchcheck.conflict_message(r))
    if not report.ok:
        print("\nthe series does not apply: check out sglang v0.5.9 afresh, or update the patches named above", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    if args.stack:
        from blackwell_stack.stacks import model

        model.load(args.stack).require_source_kernel()
    plan = build.make_plan(
        args.src, archs=args.arch, out_dir=args.out, python=args.python, max_jobs=args.jobs,
        job_peak_mib=args.job_peak_mib, warn=lambda text: print(f"warning: {text}", file=sys.stderr),
        stack=args.stack,
    )
    if args.json:
        output.dump_json(plan.to_json())
    else:
        output.heading(f"sgl-kernel build plan ({plan.source.kernel_dir})")
        print(f"architectures: {plan.archs}")
        print(f"jobs: {plan.job_plan.jobs} x nvcc threads {plan.job_plan.threads}, planned peak "
              f"{plan.job_plan.planned_peak_mib} MiB of {plan.host.available_mib} MiB available ({plan.job_plan.note})")
        print(f"patches to apply: {', '.join(plan.patches_to_apply) or 'none'}; already applied: {', '.join(plan.patches_applied) or 'none'}")
        print(f"environment: {' '.join(f'{k}={v}' for k, v in sorted(plan.env.items()))}")
        print("command: " + " ".join(plan.command))
        print(f"log: {plan.log_path}")
    if args.dry_run:
        print("dry run: nothing changed, nothing compiled", file=sys.stderr)
        return 0
    wheel = build.run_build(plan)
    print(f"built {wheel}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    cmp = compile_work.compare(args.src, args.arch)
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
