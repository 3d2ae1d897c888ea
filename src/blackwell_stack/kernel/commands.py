"""`blackwell-stack kernel ...`: the sgl-kernel patch check, build (`--dry-run`: the recipe as it would be built), its
sources, its tests on a GPU and the reference wheel."""

from __future__ import annotations

import argparse
import shlex
import sys

from blackwell_stack import output
from blackwell_stack.argtypes import positive_float, positive_int, web_url
from blackwell_stack.data import stack as stack_data
from blackwell_stack.errors import ExitCode
from blackwell_stack.kernel.build import execute, prepare
from blackwell_stack.kernel.inputs import patch_series, recipe, sourcedir, sources
from blackwell_stack.kernel.reproducibility import reference
from blackwell_stack.kernel.reproducibility.conditions import CONDITIONS
from blackwell_stack.kernel.test import command


def register(sub: argparse._SubParsersAction) -> None:
    kernel = sub.add_parser("kernel", help="sgl-kernel for SM120: patches, build without Nix (--dry-run shows the recipe), its sources by hash, its tests")
    ksub = kernel.add_subparsers(dest="kernel_command", metavar="SUBCOMMAND", required=True)

    patches = ksub.add_parser("patches", help="the sgl-kernel patch series")
    psub = patches.add_subparsers(dest="patches_command", metavar="SUBCOMMAND", required=True)
    p = psub.add_parser(
        "check",
        help="dry-run the series against a checkout, hunk by hunk",
        epilog="exit codes: 0 every patch applied or applicable; 1 a hunk conflicts or a patch is half applied; 2 bad --src; "
        "6 no GNU patch on PATH",
    )
    p.add_argument("--src", required=True, help="sglang checkout or its sgl-kernel directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_patches_check)

    p = ksub.add_parser(
        "build",
        help="build the sgl-kernel wheel from a checkout with the recipe (no Nix)",
        epilog="exit codes: 0 built (or planned, with --dry-run); 1 built with every input and condition of the "
        "reference wheel (`kernel reference`) and yet not that wheel; 2 bad --src, --arch or --sources; 5 a source "
        "directory does not match its pin; 6 toolchain wrong or not enough memory for the largest compile (refused "
        "before compiling); 7 the patch series does not apply, or the build failed (the log's path is printed). "
        "--dry-run prints the whole plan whatever the verdicts, then exits with the code a build would stop with",
    )
    p.add_argument("--src", default=None, help="sglang checkout (tag v0.5.9) or its sgl-kernel directory (default: SOURCES/sglang)")
    p.add_argument("--sources", default=None, metavar="DIR",
                   help="FetchContent sources, DIR/<name> each (`kernel sources fetch --dir DIR`): checked by hash, "
                   "the build is offline (FETCHCONTENT_FULLY_DISCONNECTED=ON)")
    p.add_argument("--arch", default=None, help="target architectures, e.g. 12.0a or 10.0a;12.0a (default: the recipe's)")
    p.add_argument("--out", default="dist", help="directory for the wheel, its build record and the log (default: dist/)")
    p.add_argument("--build-dir", default=None, help="CMake build directory (default: a fresh temporary one)")
    p.add_argument("--jobs", type=positive_int, default=None, help="at most this many build jobs (lowered if memory needs)")
    p.add_argument("--memory-gib", type=positive_float, default=None,
                   help="memory the build may use, instead of what the host reports (for hosts whose memory grows "
                   "as it is used, or to share one host between builds)")
    p.add_argument("--job-peak-mib", type=positive_int, default=None,
                   help="charge of a compile unit without a measured peak in the recipe (MiB)")
    p.add_argument("--python", default=sys.executable, help="the venv's Python that has the stack's torch (default: this one)")
    p.add_argument("--stack", default=None, help="the stack whose torch the kernel is built against (default: the default stack)")
    p.add_argument("--allow-torch", default=None, metavar="VERSION",
                   help="build against this torch instead of the stack's, on purpose (logged, and recorded in "
                   "the wheel's sgl_kernel/_build_info.json)")
    p.add_argument("--allow-source-mismatch", action="append", default=[], metavar="NAME",
                   help="build with --sources' NAME although it does not match its pin (recorded); repeatable")
    p.add_argument("--dry-run", action="store_true", help="check and plan everything, change and compile nothing")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_build)

    p = ksub.add_parser(
        "reference", help="the reference wheel: its configuration, its hashes, and whether the repository still builds it",
        epilog="exit codes: 0 the recorded configuration is the repository's; 1 an input changed since it was "
        "measured (named, with the file that changed it): measure the wheel again and record it "
        "(benchmarks/kernel-reproducibility/)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_reference)

    src = ksub.add_parser("sources", help="the FetchContent sources of pkgs/sgl-kernel/sources.json in a directory")
    ssub = src.add_subparsers(dest="sources_command", metavar="SUBCOMMAND", required=True)
    for name, func, text in (
        ("check", cmd_sources_check, "check DIR/<name> of each source by its NAR hash (no Nix needed)"),
        ("fetch", cmd_sources_fetch, "download what DIR lacks, check each by its NAR hash, keep only what matches"),
    ):
        p = ssub.add_parser(name, help=text, epilog="exit codes: 0 every source there and matching; 1 one is missing "
                            "or unpinned; 4 a download failed; 5 one does not match its pin")
        p.add_argument("--dir", required=True, help="the sources directory (what `kernel build --sources` reads)")
        p.add_argument("--arch", default=None, help="only what a build for these architectures needs (default: the recipe's)")
        p.add_argument("--all", action="store_true", help="every FetchContent source, whatever the architectures")
        p.add_argument("--with-sglang", action="store_true", help="the sglang tree too, as DIR/sglang")
        if name == "fetch":
            p.add_argument("--github", type=web_url, default=sources.GITHUB,
                           help="a mirror of github.com: every source is read from it, the archives of a revision "
                           "(OWNER/REPO/archive/REV.tar.gz) and release downloads (json's) alike")
        p.add_argument("--json", action="store_true", help="print JSON")
        p.set_defaults(func=func)

    command.register(ksub)


def cmd_patches_check(args: argparse.Namespace) -> int:
    report = patch_series.check_series(args.src)
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
    conflicts = [r for r in report.hunks if r.state == patch_series.CONFLICTING]
    for r in conflicts:
        print("\n" + patch_series.conflict_message(r))
    if not report.ok:
        print("\nthe series does not apply: check out sglang v0.5.9 afresh, or update the patches named above", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    stack = stack_data.load(args.stack or None)
    if args.stack:
        stack.require_source_kernel()
    plan = prepare.make_plan(args, stack, lambda text: print(f"warning: {text}", file=sys.stderr))
    building = not args.dry_run and not plan.blockers
    if args.json and not building:
        output.dump_json(plan.to_json())
    elif not args.json:
        _print_plan(plan)
    if plan.blockers:
        if not args.dry_run:
            raise plan.blockers[0]
        for blocker in plan.blockers:
            print(f"error: {blocker}", file=sys.stderr)
        print(f"dry run: a build would stop here ({len(plan.blockers)} problem(s) above); nothing changed", file=sys.stderr)
        return int(plan.blockers[0].code)
    if args.dry_run:
        print("dry run: nothing changed, nothing compiled", file=sys.stderr)
        return 0
    wheel = execute.run_build(plan)
    verdict = reference.compare_wheel(plan.reference.reference, wheel) if plan.reference and plan.reference.same_record else None
    if args.json:
        output.dump_json({**plan.to_json(), "wheel": str(wheel), "reference_wheel": verdict.to_json() if verdict else None})
    else:
        print(f"built {wheel}")
        print(f"build record: {plan.build_info_path} (also in the wheel as sgl_kernel/_build_info.json)")
        _print_wheel_verdict(plan.reference, verdict)
    # Every input and condition the reference's, and still another wheel: reproducibility is broken.
    return int(ExitCode.CHECK_FAILED) if plan.reference and plan.reference.same and verdict and not verdict.identical else 0


def _print_wheel_verdict(config: reference.ConfigVerdict | None, verdict: reference.WheelVerdict | None) -> None:
    if verdict is None:
        if config is not None:
            print(f"reference: {config.summary()}")
        return
    print(f"reference: {verdict.summary()}")
    if not config or not config.same:
        print(f"  (the conditions differ from the reference's: {config.summary() if config else 'unknown'})")
    if verdict.members:
        output.table(["member", "class", "detail"], output.grouped_rows(verdict.members))


def _print_plan(plan: prepare.BuildPlan) -> None:
    output.heading(f"sgl-kernel build plan ({plan.source.kernel_dir})")
    print(f"architectures: {plan.archs}")
    if plan.torch:
        print(f"torch: {plan.torch.version} (expected by {plan.torch.source})")
    jp = plan.job_plan
    if jp:
        pool = (f", heavy units {jp.heavy_jobs} at a time ({output.counted(len(jp.heavy_sources), 'unit')} in their "
                "pool: --json lists them)" if jp.heavy_jobs else "")
        print(f"jobs: {jp.jobs} x nvcc threads {jp.threads}{pool}; worst case {jp.planned_peak_mib} MiB of "
              f"{plan.host.available_mib} MiB ({plan.host.source}; {jp.note})")
    else:
        print(f"jobs: none fit in {plan.host.available_mib} MiB ({plan.host.source})")
    for label, names in (("patches to apply", plan.patches_to_apply), ("patches already applied", plan.patches_applied)):
        print(f"{label}:" + "".join(f"\n  {name}" for name in names) if names else f"{label}: none")
    for state in plan.source_dirs:
        print(f"source {state.entry.relpath}: {state.state} ({state.path})")
    for copy in plan.source_copies:
        subs = "".join(f" + {path}" for path, _ in copy.submodules)
        print(f"source {copy.name}{subs}: copied to {copy.dest} before CMake runs (CMake edits it in place)")
    for check in plan.checks:
        print(check.line())
    # One variable, one argument per line: the command stays a command a shell can run (a line each for its
    # dozens of -D flags, where one line ran past a thousand characters).
    print("environment:")
    for key, value in sorted(plan.env.items()):
        print(f"  {key}={shlex.quote(value)}")
    print("command:")
    print(" \\\n".join(f"  {shlex.quote(arg)}" if i == 0 else f"    {shlex.quote(arg)}"
                       for i, arg in enumerate(plan.command)))
    print(f"build directory: {plan.build_dir}")
    print(f"build record: {plan.build_info_path}")
    print(f"log: {plan.log_path}")
    if plan.reference:
        print("reference: " + "\n  ".join(plan.reference.lines()))


def cmd_reference(args: argparse.Namespace) -> int:
    doc = reference.document()
    ref = doc.current
    stale = reference.stale_inputs(ref) if ref else []
    if args.json:
        if ref is None:
            shown: dict[str, object] = {"reference": str(doc.path), "current": None, "reason": doc.reason,
                                        "withdrawn": doc.withdrawn, "to_record": doc.to_record}
        else:
            shown = {
                "reference": str(ref.path), "arch": ref.arch, "command": ref.command, "conditions": ref.conditions,
                "wheel": {"name": ref.wheel_name, "sha256": ref.wheel_sha256, "size": ref.wheel_size},
                "compiled": ref.compiled, "current": not stale,
                "changed_inputs": [{"what": d.what, "recorded": d.reference, "repository": d.this, "owner": d.owner}
                                   for d in stale],
            }
        output.dump_json(shown)
        return int(ExitCode.CHECK_FAILED) if stale else 0
    output.heading(f"reference sgl-kernel wheel ({doc.path})")
    if ref is None:
        output.paragraph(f"none for the repository's recipe: {doc.reason}")
        for w in doc.withdrawn:
            output.paragraph(f"withdrawn: {w['wheel']}, sha256 {w['sha256']} ({w['arch']}; {w['measured']}): {w['why']}")
        output.paragraph(f"to record one: {doc.to_record}")
        return 0
    print(f"wheel: {ref.wheel_name}\n  sha256 {ref.wheel_sha256}, {ref.wheel_size} bytes")
    output.table(["compiled library", "sha256", "bytes"],
                 [[name, c["sha256"], c.get("size", "")] for name, c in sorted(ref.compiled.items())])
    output.heading("configuration")
    print(f"command: {ref.command}")
    output.table(["condition", "value"], [[name, ref.conditions[name]] for name in CONDITIONS])
    print(f"architectures: {ref.arch}; patches: {len(ref.build_record.get('patches') or [])}; the rest is the "
          f"build record in {ref.path.name}")
    if stale:
        print(f"\nthe repository no longer builds this configuration: {len(stale)} recorded input(s) changed", file=sys.stderr)
        for d in stale:
            print(f"  {d.what}: recorded {d.reference}, repository {d.this} ({d.owner})", file=sys.stderr)
        print("  measure the wheel again and record it (benchmarks/kernel-reproducibility/README.md)", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)
    print("\ncurrent: every recorded input is what the repository builds today")
    return 0


def _source_items(args: argparse.Namespace):
    archs = []  # --all: every architecture's sources
    if not args.all:
        rec = recipe.load()
        archs = recipe.arch_list(recipe.check_archs(rec, args.arch or rec["arch"]))
    return sourcedir.entries(sources.load(), archs, with_sglang=args.with_sglang)


def _states_code(states: list[sourcedir.State], as_json: bool) -> int:
    """Print the states; 0 when every source is as pinned, 5 when one does not match its pin (as `kernel build`
    says of it), else 1."""
    ok = all(s.state == sourcedir.OK for s in states)
    if as_json:
        output.dump_json({"ok": ok, "sources": [s.to_json() for s in states]})
    else:
        output.table(["source", "state", "NAR hash", "path"],
                     [[s.entry.relpath, s.state, s.actual or "-", str(s.path)] for s in states])
        for s in states:
            if s.state == sourcedir.MISMATCH:
                print(f"{s.entry.relpath}: pinned {s.entry.expected}, found {s.actual}", file=sys.stderr)
    if ok:
        return 0
    return int(ExitCode.HASH_MISMATCH if any(s.state == sourcedir.MISMATCH for s in states) else ExitCode.CHECK_FAILED)


def cmd_sources_check(args: argparse.Namespace) -> int:
    return _states_code(sourcedir.check(args.dir, _source_items(args)), args.json)


def cmd_sources_fetch(args: argparse.Namespace) -> int:
    return _states_code(sourcedir.fetch(args.dir, _source_items(args), github=args.github,
                                        say=lambda text: print(text, file=sys.stderr)), args.json)
