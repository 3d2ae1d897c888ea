"""CLI commands of the doctor area: `inspect`, `doctor` (and `doctor abi`), `wheel diff`."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from blackwell_stack import inputfiles, output
from blackwell_stack.argtypes import positive_int
from blackwell_stack.data.profile import available_profiles, load_profile
from blackwell_stack.doctor import abi, checks, envcheck, host, inspection, startup
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.formats import wheeldiff
from blackwell_stack.kernel.reproducibility import reference


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="CUDA architectures, CUDA runtime and torch symbols of every ELF in a wheel, directory or .so",
    )
    p.add_argument("path", help="a .whl file, an installed package directory, or a shared library")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--jobs", type=positive_int, default=None, help="worker processes (default: CPUs, at most 4)")
    p.set_defaults(func=run_inspect)

    d = sub.add_parser("doctor", help="check this host and Python environment for the stack (ok / warn / fail)")
    d.add_argument("--json", action="store_true", help="print JSON instead of tables")
    d.add_argument("--python", help="check the environment of this interpreter (a venv's bin/python)")
    d.add_argument("--target-cc", default=host.TARGET_CC, help="compute capability the stack targets (12.0)")
    d.add_argument("--profile", default=None,
                   help="the profile whose model and environment SGLang's start-up imports are checked for (default: "
                   "the profile made for the environment's sglang)")
    d.add_argument("--no-imports", action="store_true",
                   help="skip importing what SGLang's start-up imports (each in its own process; about a minute)")
    d.add_argument("--import-timeout", type=positive_int, default=int(startup.DEFAULT_TIMEOUT_S), metavar="SECONDS",
                   help="how long one start-up import may take (default %(default)s)")
    d.set_defaults(func=run_doctor)
    dsub = d.add_subparsers(dest="doctor_command", metavar="SUBCOMMAND")
    a = dsub.add_parser("abi", help="can this kernel package load into this torch? (undefined symbols, CUDA runtime)")
    a.add_argument("--kernel", default=abi.ENV,
                   help="sgl-kernel: a wheel, a directory, a .so, `env` (installed) or `pypi:sgl-kernel==0.3.21`")
    a.add_argument("--torch", default=abi.ENV,
                   help="torch: a wheel, torch/lib, `env` (installed) or `pypi:torch==2.10.0` (range reads, cached)")
    a.add_argument("--json", dest="abi_json", action="store_true", help="print JSON instead of text")
    # Also accepted after `abi` (its own hints say so); SUPPRESS keeps `doctor --python X abi` working too.
    a.add_argument("--python", default=argparse.SUPPRESS,
                   help="resolve `env` in this interpreter's environment (a venv's bin/python)")
    a.set_defaults(func=run_abi)

    w = sub.add_parser("wheel", help="wheel tools")
    wsub = w.add_subparsers(dest="wheel_command", metavar="SUBCOMMAND")
    wsub.required = True
    wd = wsub.add_parser("diff", help="identical (sha256), or how two wheels differ member by member",
                         usage="%(prog)s [-h] [--json] (A B | --reference WHEEL)")
    wd.add_argument("a", help="a wheel")
    wd.add_argument("b", nargs="?", help="the wheel to compare it with")
    wd.add_argument("--reference", action="store_true",
                    help="compare A with the reference sgl-kernel wheel (pkgs/sgl-kernel/reference-wheel.json) "
                    "by its recorded hashes, member by member")
    wd.add_argument("--json", action="store_true", help="print JSON instead of tables")
    wd.set_defaults(func=run_wheel_diff)


# -- inspect -------------------------------------------------------------


def run_inspect(args: argparse.Namespace) -> int:
    started = time.monotonic()
    report = inspection.inspect_path(args.path, jobs=args.jobs)
    report["seconds"] = round(time.monotonic() - started, 2)
    if args.json:
        output.dump_json(report)
    else:
        print_inspect(report)
    return int(ExitCode.CHECK_FAILED) if report["errors"] or report["problems"] else 0


def print_inspect(report: dict) -> None:
    dist = report["distribution"]
    what = f"{dist['name']} {dist['version']}, " if dist else ""
    print(f"{report['path']} ({what}{report['kind']}, {report['elf_files']} ELF files)")
    failing = {p["name"] for p in report["problems"]}
    output.table(["file", "machine", "CUDA", "torch syms", "cubin", "ptx", "C++ runtime"],
                 [_inspect_row(f, failing) for f in report["files"]])
    print()
    print(f"CUDA runtime: {', '.join(map(str, report['cuda_runtime'])) or 'none (no CUDA runtime linked)'}")
    print(f"cubin:        {', '.join(report['cubin']) or 'none'}")
    print(f"ptx:          {', '.join(report['ptx']) or 'none'}")
    print(f"torch:        {report['torch_symbols']} symbols from {', '.join(report['torch_libraries']) or 'none'}")
    if record := report.get("record"):
        verdict = "every file matches" if record["ok"] else "DISAGREES with the files (see the errors below)"
        print(f"RECORD:       {record['checked']} files checked by sha256 and size; {verdict}")
    for f in report["files"]:
        if f.get("relocatable"):
            print(f"relocatable:  {f['name']}: {', '.join(f['relocatable'])} (device-link inputs, never loaded as is)")
    for e in report["errors"]:
        print(f"error: {e['name']}: {e['error']}")
    for p in report["problems"]:
        print(f"FAIL {p['check']}: {p['message']}\n  fix: {p['fix']}")
    for n in report["notes"]:
        print(f"note: {n}")
    print(f"({report['seconds']} s)")


def _inspect_row(f: dict, failing: set[str]) -> list:
    if f["error"]:
        return [f["name"], "error", None, None, None, None, None]
    cxx = f["cxx_runtime"]["verdict"]
    return [f["name"], f["machine"], f["cuda_runtime"], len(f["torch_symbols"]) or None, ", ".join(f["cubin"]) or None,
            ", ".join(f["ptx"]) or None, cxx.upper() if cxx and f["name"] in failing else cxx]


# -- doctor --------------------------------------------------------------


def run_doctor(args: argparse.Namespace) -> int:
    facts = host.gather()
    results = host.checks(facts, target_cc=args.target_cc)
    gpu_cc = facts.gpus[0].compute_cap if facts.gpus else None
    env = envcheck.Environment(args.python)
    results += envcheck.checks(env, gpu_cc=gpu_cc, target_cc=args.target_cc)
    if not args.no_imports:
        results += _startup_checks(env, args.profile, gpu_cc, args.import_timeout)
    status = checks.worst(results)
    if args.json:
        output.dump_json({
            "status": status,
            "checks": [asdict(c) for c in results],
            "host": {
                "driver": facts.driver, "driver_source": facts.driver_source, "gpus": [g.__dict__ for g in facts.gpus],
                "topology": host.parse_topology(facts.topology or ""),
                "nvlink_active_links": host.parse_nvlink_status(facts.nvlink_status or ""),
                "cpus": facts.cpus, "mem_total_kib": facts.mem_total_kib, "swap_total_kib": facts.swap_total_kib,
            },
        })
    else:
        groups = {"host": "Host", "python": "Python environment", "startup": "SGLang start-up imports",
                  "build": "Kernel build"}
        for group, title in groups.items():
            rows = [c for c in results if c.group == group]
            if not rows:
                continue
            output.heading(title)
            output.table(["status", "check", "value", "details"],
                         [[c.status.upper(), c.name, c.value, c.message] for c in rows])
            for c in rows:
                if c.status != checks.OK and c.fix:
                    print(f"  fix ({c.name}): {c.fix}")
        print(f"\noverall: {status.upper()}")
    return int(ExitCode.CHECK_FAILED) if status == checks.FAIL else 0


def _startup_checks(env: envcheck.Environment, profile_name: str | None, gpu_cc: str | None,
                    timeout: float) -> list[checks.Check]:
    """SGLang's start-up imports in env, for the profile's model, with its environment variables."""
    installed = env.get("sglang")
    if installed is None:
        return []
    # Without --profile: the first profile made for this sglang, else the default one.
    made_for = (p for p in map(load_profile, available_profiles()) if p.runtime().sglang == installed.version)
    if profile_name:
        chosen = load_profile(profile_name)
    else:
        chosen = next(made_for, None) or load_profile(None)
    model = chosen.data.get("model") or {}
    return startup.checks(env.python, installed.version, architecture=model.get("architecture"), gpu_cc=gpu_cc,
                          env=chosen.env_values(), timeout=timeout)


def run_abi(args: argparse.Namespace) -> int:
    environment = envcheck.Environment(args.python) if args.python else None
    kernel = abi.load_kernel(args.kernel, environment)
    result = abi.compare(kernel, abi.load_torch(args.torch, kernel, environment))
    if args.abi_json or args.json:
        output.dump_json(result)
    else:
        print_abi(result)
    return 0 if result["ok"] else int(ExitCode.CHECK_FAILED)


def print_abi(result: dict) -> None:
    k, t = result["kernel"], result["torch"]
    print(f"kernel: {k['label']} (version {k['version'] or '?'}, {', '.join(k['machine'])}, "
          f"CUDA runtime {k['cuda_runtime'] or 'none'})")
    print(f"torch:  {t['label']} (version {t['version'] or '?'}, {', '.join(t['machine'])}, "
          f"CUDA runtime {t['cuda_runtime'] or 'none'}; {', '.join(t['libraries'])})")
    print(f"torch symbols: {result['resolved']} of {k['torch_symbols_needed']} resolve")
    for m in result["missing"]:
        print(f"\nMISSING {m['demangled']}\n  mangled:   {m['symbol']}\n  needed by: {', '.join(m['needed_by'])}")
        for c in m["torch_has"]:
            print(f"  torch has: {c['demangled']} in {c['library']}")
            if c["difference"]:
                print(f"  difference: {c['difference']}")
    for p in result["problems"]:
        print(f"\nFAIL {p['check']}: {p['message']}\n  fix: {p['fix']}")
    print("\nresult: " + ("OK, the kernel's torch symbols, CUDA runtime and C++ runtime match" if result["ok"] else "FAIL"))


# -- wheel diff ----------------------------------------------------------


def run_wheel_diff(args: argparse.Namespace) -> int:
    if args.reference:
        if args.b is not None:
            raise StackError("--reference compares one wheel with the reference", "pass one wheel: wheel diff --reference WHEEL")
        return _wheel_diff_reference(args.a, args.json)
    if args.b is None:
        raise StackError("wheel diff needs two wheels", "pass A and B, or one wheel with --reference")
    result = wheeldiff.diff(args.a, args.b)
    if args.json:
        output.dump_json(result)
    else:
        print(f"a: {result['a']}\n   sha256 {result['sha256_a']}")
        print(f"b: {result['b']}\n   sha256 {result['sha256_b']}")
        if result["identical"]:
            print("identical: the two wheels are bit for bit the same")
        else:
            output.table(["member", "difference", "detail"], output.grouped_rows(result["members"]))
            counts = ", ".join(f"{n} {c}" for c, n in result["classes"].items())
            print(f"\nnot identical: {counts}; worst: {result['verdict']}")
    return 0 if result["identical"] else int(ExitCode.CHECK_FAILED)


def _wheel_diff_reference(wheel: str, as_json: bool) -> int:
    inputfiles.regular_file(wheel, "wheel", "pass a wheel file")  # the user's input first, then the project's
    doc = reference.document()
    ref = doc.current
    if ref is None:
        raise StackError(f"no reference wheel is recorded ({doc.path.name}): {doc.reason}",
                         f"compare two wheels instead: wheel diff A B; {doc.to_record}")
    verdict = reference.compare_wheel(ref, wheel)
    if as_json:
        output.dump_json(verdict.to_json())
    else:
        print(f"wheel:     {verdict.wheel}\n           sha256 {verdict.sha256}, {verdict.size} bytes")
        print(f"reference: {ref.wheel_name} ({ref.path.name})\n           sha256 {ref.wheel_sha256}, {ref.wheel_size} bytes")
        if verdict.members:
            output.table(["member", "difference", "detail"], output.grouped_rows(verdict.members))
        print(verdict.summary())
    return 0 if verdict.identical else int(ExitCode.CHECK_FAILED)

