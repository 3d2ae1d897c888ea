"""CLI commands of the serve area: render, check, run, flags extract|show."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.fileio import atomic_write_json, check_output_path
from blackwell_stack.output import dump_json, heading, table
from blackwell_stack.paths import data_path
from blackwell_stack.serve import flags as flagmod
from blackwell_stack.serve.profile import DEFAULT_PROFILE, load_profile, load_rules
from blackwell_stack.serve.render import Rendered, parse_set, render
from blackwell_stack.serve.rules import Verdict, evaluate


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="render, check and run the SGLang service command")
    serve_sub = serve.add_subparsers(dest="serve_command", metavar="SUBCOMMAND")
    serve_sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", default=DEFAULT_PROFILE, help=f"profile name or JSON path (default {DEFAULT_PROFILE})")
        p.add_argument(
            "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
            help="override a flag, e.g. --set attention-backend=triton (null removes it); repeatable",
        )
        p.add_argument(
            "extra_args", nargs="*", metavar="-- EXTRA_ARG",
            help="words appended after the profile's flags, like services.sglang.extraArgs (write them after --)",
        )
        p.add_argument("--flags-table", type=Path, help="flag table JSON (default modules/sglang-flags.json)")
        p.add_argument("--json", action="store_true", help="print JSON")

    p = serve_sub.add_parser("render", help="print the exact SGLang argv and environment")
    common(p)
    p.set_defaults(func=cmd_render)

    p = serve_sub.add_parser("check", help="evaluate every rule; exit 1 on errors")
    common(p)
    p.set_defaults(func=cmd_check)

    p = serve_sub.add_parser("run", help="check, then exec python -m sglang.launch_server with the rendered argv")
    common(p)
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.add_argument("--python", default=sys.executable, help="the Python that has sglang (default: this one)")
    p.set_defaults(func=cmd_run)

    p = serve_sub.add_parser("flags", help="the pinned SGLang's flag table")
    flags_sub = p.add_subparsers(dest="flags_command", metavar="SUBCOMMAND")
    flags_sub.required = True
    e = flags_sub.add_parser("extract", help="extract the flag table from an sglang wheel (static, no import)")
    e.add_argument("--wheel", type=Path, required=True, help="sglang-<version>-py3-none-any.whl")
    e.add_argument("--output", type=Path, default=None, help="where to write (default modules/sglang-flags.json)")
    e.set_defaults(func=cmd_flags_extract)
    s = flags_sub.add_parser("show", help="look up flags in the committed table")
    s.add_argument("names", nargs="*", help="flags to show (default: all)")
    s.add_argument("--flags-table", type=Path)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_flags_show)


def _render(args: argparse.Namespace) -> tuple[Rendered, list[Verdict]]:
    table = flagmod.load_table(args.flags_table)
    rules = load_rules()
    profile = load_profile(args.profile)
    rendered = render(profile, table, rules, parse_set(args.settings, table), args.extra_args)
    return rendered, evaluate(rendered, rules, table.data)


def command_line(rendered: Rendered, python: str = "python") -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in rendered.env.items())
    cmd = shlex.join([python, "-m", "sglang.launch_server", *rendered.argv])
    return f"{env} {cmd}".strip()


def cmd_render(args: argparse.Namespace) -> int:
    rendered, verdicts = _render(args)
    if args.json:
        dump_json({"profile": rendered.profile, "argv": rendered.argv, "env": rendered.env,
                   "verdicts": [v.to_json() for v in verdicts if v.fired]})
        return int(ExitCode.OK)
    heading(f"SGLang command ({rendered.profile})")
    print(command_line(rendered))
    heading("environment")
    profile = load_profile(args.profile)
    table(["variable", "value", "reason"],
          [(k, v, profile.data["env"].get(k, {}).get("reason", "set with --set")) for k, v in rendered.env.items()])
    _print_fired(verdicts)
    return int(ExitCode.OK)


def _print_fired(verdicts: list[Verdict]) -> None:
    for v in verdicts:
        for msg in v.messages:
            print(f"{v.severity}: [{v.id}] {msg}", file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    rendered, verdicts = _render(args)
    errors = [v for v in verdicts if v.fired and v.severity == "error"]
    if args.json:
        dump_json({"profile": rendered.profile, "ok": not errors, "verdicts": [v.to_json() for v in verdicts]})
    else:
        heading(f"rules ({rendered.profile})")
        rows = []
        for v in verdicts:
            verdict = ("FAIL" if v.severity == "error" else "WARN") if v.fired else "ok"
            rows.append((v.id, v.severity, verdict, "; ".join(v.messages) or "-"))
        table(["rule", "severity", "verdict", "detail"], rows)
        print(f"\n{len(errors)} error(s), {sum(1 for v in verdicts if v.fired and v.severity == 'warning')} warning(s)")
    return int(ExitCode.CHECK_FAILED if errors else ExitCode.OK)


def cmd_run(args: argparse.Namespace) -> int:
    rendered, verdicts = _render(args)
    errors = [v for v in verdicts if v.fired and v.severity == "error"]
    _print_fired(verdicts)
    if errors:
        raise StackError(
            f"{len(errors)} rule(s) refuse this configuration: {', '.join(v.id for v in errors)}",
            "fix the flags named above (`blackwell-stack serve check` lists every rule), then run again",
            code=ExitCode.CHECK_FAILED,
        )
    argv = [args.python, "-m", "sglang.launch_server", *rendered.argv]
    if args.dry_run:
        if args.json:
            dump_json({"profile": rendered.profile, "argv": argv, "env": rendered.env,
                       "command": command_line(rendered, args.python)})
        else:
            print(command_line(rendered, args.python))
        return int(ExitCode.OK)
    env = {**os.environ, **rendered.env}
    proc.echo(argv)
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        raise StackError(f"cannot start {argv[0]}: {exc}", "pass --python with the interpreter that has sglang installed") from exc
    return int(ExitCode.OK)  # not reached


def cmd_flags_extract(args: argparse.Namespace) -> int:
    out = check_output_path(args.output or data_path(*flagmod.FLAGS_FILE), "--output")
    data = flagmod.extract_wheel(args.wheel)
    atomic_write_json(out, data)
    print(f"{out}: {len(data['flags'])} flags of sglang {data['sglang_version']} ({data['wheel']['filename']}, sha256 {data['wheel']['sha256']})")
    return int(ExitCode.OK)


def cmd_flags_show(args: argparse.Namespace) -> int:
    t = flagmod.load_table(args.flags_table)
    names = args.names or list(t.flags)
    rows, out = [], {}
    for name in names:
        name = name if name.startswith("--") else f"--{name}"
        primary = t.canonical(name)
        if primary is None:
            hint = t.suggest(name)
            raise StackError(f"sglang {t.data['sglang_version']} has no flag {name}", f"did you mean {hint}?" if hint else None)
        e = t.flags[primary]
        out[primary] = e
        rows.append((primary, ", ".join(e["aliases"]) or "-", e["type"] or e["action"], e["default"],
                     ", ".join(map(str, e["choices"])) if e["choices"] else (e["choices_unresolved"] and f"(unresolved: {e['choices_unresolved']})")))
    if args.json:
        dump_json(out)
    else:
        table(["flag", "aliases", "type", "default", "choices"], rows)
    return int(ExitCode.OK)
