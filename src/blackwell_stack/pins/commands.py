"""`blackwell-stack pins show|update kernel-sources|rescue|vendor`."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from blackwell_stack import argtypes, output
from blackwell_stack.data import registry
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.plan import STANDINGS, UNVERIFIED
from blackwell_stack.kernel.inputs import sources as kernel_sources
from blackwell_stack.pins import flake_inputs, inventory
from blackwell_stack.pins.rescue import rescue
from blackwell_stack.pins.vendor import vendor
from blackwell_stack.stacks import plan as stack_plan


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

    fi = psub.add_parser("flake-inputs", help="after `nix flake update`: record flake.lock's inputs in "
                         "nix/flake-inputs.json, each narHash computed again where it can be")
    fi.add_argument("--offline", action="store_true", help="compute nothing: take every changed narHash from the lock")
    fi.add_argument("--github", default=flake_inputs.GITHUB, type=argtypes.web_url, metavar="URL",
                    help=f"where GitHub's archives are fetched from (default: {flake_inputs.GITHUB})")
    fi.set_defaults(func=cmd_flake_inputs)

    ven = psub.add_parser("vendor", help="check a kept wheel against the stack's lock that names it and add it to the Nix store")
    ven.add_argument("wheel", type=Path, metavar="FILE.whl")
    ven.set_defaults(func=cmd_vendor)


def cmd_show(args: argparse.Namespace) -> int:
    if args.stack:
        stack = stack_data.load(args.stack)
        rows = list(stack_plan.locked_files(stack).values()) if stack.locked else [stack_plan.summary_row(stack)]
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


def cmd_update_kernel_sources(args: argparse.Namespace) -> int:
    done = kernel_sources.update(args.file, refresh=args.refresh, only=args.only)
    if not done:
        print("every kernel source pin is verified already (use --refresh to re-hash)")
        return 0
    output.table(["pin", "hash"], done)
    return 0


def cmd_flake_inputs(args: argparse.Namespace) -> int:
    changes = flake_inputs.update(github=args.github, offline=args.offline)
    output.table(["input", "rev", "narHash", "how"],
                 [[c.name, c.rev[:12], c.narhash, c.how + (f": {c.detail}" if c.detail else "")] for c in changes])
    print(f"wrote {registry.entry('flake-inputs').pattern}")
    return 0


def cmd_rescue(args: argparse.Namespace) -> int:
    done = rescue(args.dist, args.from_venv, args.out)
    print(f"repacked {done.dist} {done.version} from {args.from_venv}: {done.files} files, each checked against the "
          f"RECORD it was installed with ({len(done.left_out)} made by the installer left out)")
    print(f"wrote {done.wheel}\nsha256 {done.sha256}")
    print("This wheel holds the same files as the installed one, not the same zip bytes as the wheel it came from: "
          "its sha256 is a new pin, not the upstream one.")
    print("Lock a stack against it with its lock command, e.g.: blackwell-stack stack lock nightly --wheels "
          f"{done.wheel.parent}")
    print(f"then add it to the Nix store with: blackwell-stack pins vendor {done.wheel}")
    return 0


def cmd_vendor(args: argparse.Namespace) -> int:
    locks = [s.lock_path for s in map(stack_data.load, stack_data.names()) if s.locked]
    result = vendor(args.wheel, locks)
    print(f"{args.wheel.name} matches its pin; added ({result.package}, uv.lock in {result.lock}):\n{result.store_path}")
    return 0
