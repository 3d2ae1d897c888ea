"""`blackwell-stack pins show|update|vendor`."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from blackwell_stack import argtypes, output
from blackwell_stack import pypi as pypi_api
from blackwell_stack.data import registry
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.plan import STANDINGS, UNVERIFIED
from blackwell_stack.fileio import check_output_path
from blackwell_stack.kernel.inputs import sources as kernel_sources
from blackwell_stack.pins import inventory
from blackwell_stack.pins.rescue import rescue
from blackwell_stack.pins.update import update_pypi, update_torch
from blackwell_stack.pins.vendor import vendor
from blackwell_stack.stacks import plan as stack_plan

# The torch nightly's pins: the nightly stack keeps them (stack.json kept_wheels.pins).
NIGHTLY = "nightly"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pins", help="show, update, rescue and vendor the pins (every stack's lock, its kept wheels, kernel sources, flake inputs)")
    psub = p.add_subparsers(dest="pins_command", metavar="ACTION")
    psub.required = True

    show = psub.add_parser("show", help="every pin in one table (a stack's lock as one row; --stack NAME lists its files)")
    show.add_argument("--json", action="store_true")
    show.add_argument("--stack", metavar="NAME", help="every file of this stack's lock, and the wheels it keeps")
    show.set_defaults(func=cmd_show)

    upd = psub.add_parser("update", help="resolve, download and hash pins")
    usub = upd.add_subparsers(dest="update_target", metavar="TARGET")
    usub.required = True

    torch = usub.add_parser("torch", help="pin a dated torch nightly and the triton it requires")
    torch.add_argument("--date", required=True, help="nightly date, YYYYMMDD (e.g. 20260307)")
    torch.add_argument("--cuda", default="cu130", help="CUDA flavour of the index (default: cu130)")
    torch.add_argument("--python", action="append", dest="pythons", metavar="X.Y", help="Python version (repeatable; default 3.12)")
    torch.add_argument("--system", action="append", dest="systems", metavar="SYSTEM", help="Nix system (repeatable; default x86_64-linux)")
    torch.add_argument("--index-url", type=argtypes.web_url, help="PEP 503/691 index (default: https://download.pytorch.org/whl/nightly/<cuda>)")
    torch.add_argument("--file", type=Path, help=f"pins file to write (default: {registry.entry('kept-wheel-pins').pattern.format(name=NIGHTLY)})")
    torch.set_defaults(func=cmd_update_torch)

    pypi = usub.add_parser("pypi", help="pin PyPI releases (NAME==VERSION) with their hashes")
    pypi.add_argument("specs", nargs="+", metavar="NAME==VERSION")
    pypi.add_argument("--file", type=Path, required=True, help="pins file to create or update")
    pypi.add_argument("--python", action="append", dest="pythons", metavar="X.Y", help="Python version for binary wheels (default 3.12)")
    pypi.add_argument("--system", action="append", dest="systems", metavar="SYSTEM", help="Nix system (default x86_64-linux)")
    pypi.add_argument("--index-url", type=argtypes.web_url, default=None, help="PyPI JSON API base (default: https://pypi.org/pypi)")
    pypi.set_defaults(func=cmd_update_pypi)

    ks = usub.add_parser("kernel-sources", help="prefetch and hash sgl-kernel's source and FetchContent pins (needs Nix and GitHub)")
    ks.add_argument("--refresh", action="store_true", help="re-hash every pin, not only the unverified ones")
    ks.add_argument("--only", action="append", metavar="ID", help="hash only this pin (e.g. fetchcontent.repo-cutlass; repeatable)")
    ks.add_argument("--file", type=Path, help="sources file (default: pkgs/sgl-kernel/sources.json)")
    ks.set_defaults(func=cmd_update_kernel_sources)

    res = psub.add_parser(
        "rescue",
        help="repack an installed distribution into a wheel, every file checked against its RECORD",
        epilog="exit codes: 0 written; 2 not installed, or a file is missing; 5 a file differs from its RECORD "
        "(nothing is written on any refusal)",
    )
    res.add_argument("dist", metavar="DIST", help="the installed distribution, e.g. torch")
    res.add_argument("--from-venv", required=True, type=Path, metavar="VENV", help="the venv (or its bin/python) it is installed in")
    res.add_argument("--out", type=Path, default=Path("."), metavar="DIR", help="where to write the wheel (default: here)")
    res.set_defaults(func=cmd_rescue)

    ven = psub.add_parser("vendor", help="check a kept wheel against its pin or a stack's lock and add it to the Nix store")
    ven.add_argument("wheel", type=Path, metavar="FILE.whl")
    ven.add_argument("--file", type=Path, action="append", dest="files", help="pins file(s) to match against (default: all)")
    ven.add_argument("--record", action="store_true", help="fill an unverified pin with this file's own hash")
    ven.set_defaults(func=cmd_vendor)


def cmd_show(args: argparse.Namespace) -> int:
    if args.stack:
        stack = stack_data.load(args.stack)
        rows = stack_plan.kept_wheel_pins(stack) + (stack_plan.locked_files(stack) if stack.locked
                                                     else [stack_plan.summary_row(stack)])
    else:
        rows = inventory.all_pins()
    if args.json:
        output.dump_json({"pins": [r.to_json() for r in rows]})
        return 0
    output.table(
        ["what", "version", "hash", "checked", "source"],
        [[r.what, r.version, r.hash, r.checked, r.hash_source if r.verified else r.reason] for r in rows],
        max_width=None if args.wide else 60,
    )
    if not args.wide:
        print("\n(long cells are cut: --wide or --json shows them whole)")
    counts = Counter(r.standing for r in rows)
    print()
    output.paragraph("; ".join(f"{counts[kind]} {kind}" for kind in STANDINGS if counts[kind])
                     + " (as `blackwell-stack plan` counts them)")
    missing = [r for r in rows if not r.verified]
    if missing:
        output.paragraph(f"{output.counted(len(missing), 'pin')} {UNVERIFIED}: each file's update_command fills "
                         "them (`blackwell-stack plan unverified` names each command).")
    return 0


def cmd_update_torch(args: argparse.Namespace) -> int:
    path = args.file or registry.path("kept-wheel-pins", NIGHTLY)
    check_output_path(path, "--file")  # before resolving and downloading
    data = update_torch(
        path,
        date=args.date,
        cuda=args.cuda,
        pythons=args.pythons or ["3.12"],
        systems=args.systems or ["x86_64-linux"],
        index_url=args.index_url,
    )
    _print_written(path, data)
    return 0


def cmd_update_pypi(args: argparse.Namespace) -> int:
    check_output_path(args.file, "--file")  # before resolving and downloading
    data = update_pypi(
        args.file,
        args.specs,
        pythons=args.pythons or ["3.12"],
        systems=args.systems or ["x86_64-linux"],
        index_json=args.index_url or pypi_api.PYPI_JSON,
    )
    _print_written(args.file, data)
    return 0


def cmd_update_kernel_sources(args: argparse.Namespace) -> int:
    done = kernel_sources.update(args.file, refresh=args.refresh, only=args.only)
    if not done:
        print("every kernel source pin is verified already (use --refresh to re-hash)")
        return 0
    output.table(["pin", "hash"], done)
    return 0


def _print_written(path: Path, data: dict) -> None:
    rows = [[name, pkg["version"], key, e["hash"]] for name, pkg in data["packages"].items() for key, e in pkg["wheels"].items()]
    output.table(["package", "version", "wheel", "hash"], rows)
    print(f"wrote {path}")


def cmd_rescue(args: argparse.Namespace) -> int:
    done = rescue(args.dist, args.from_venv, args.out)
    print(f"repacked {done.dist} {done.version} from {args.from_venv}: {done.files} files, each checked against the "
          f"RECORD it was installed with ({len(done.left_out)} made by the installer left out)")
    print(f"wrote {done.wheel}\nsha256 {done.sha256}")
    print("This wheel holds the same files as the installed one, not the same zip bytes as the wheel it came from: "
          "its sha256 is a new pin, not the upstream one.")
    print(f"Record it (and add it to the Nix store) with: blackwell-stack pins vendor {done.wheel} --record")
    print("Lock a stack against it with its lock command, e.g.: blackwell-stack stack lock nightly --wheels "
          f"{done.wheel.parent}")
    return 0


def cmd_vendor(args: argparse.Namespace) -> int:
    files = args.files or inventory.wheel_pins_paths()
    locks = [] if args.files else [s.lock_path for s in map(stack_data.load, stack_data.names()) if s.locked]
    result = vendor(args.wheel, files, record=args.record, locks=locks)
    verb = "pinned and added" if result.recorded else "matches its pin; added"
    print(f"{args.wheel.name} {verb} ({result.package}, {result.key} in {result.pins_file}):\n{result.store_path}")
    return 0
