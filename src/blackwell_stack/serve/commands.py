"""CLI commands of the serve area: render, check, run."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from pathlib import Path

from blackwell_stack import output, proc
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.profile import DEFAULT_PROFILE, load_profile
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.fileio import atomic_write_json, check_output_path
from blackwell_stack.output import dump_json, heading, paragraph, table
from blackwell_stack.serve import model_pin, module_check
from blackwell_stack.serve.rules import Verdict
from blackwell_stack.serve.service import Service, command_line, configure
from blackwell_stack.sglang_python import check_sglang


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="render, check and run the SGLang service command")
    serve_sub = serve.add_subparsers(dest="serve_command", metavar="SUBCOMMAND")
    serve_sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", default=None,
                       help=f"profile name or JSON path (default: the --stack's first profile, else {DEFAULT_PROFILE})")
        p.add_argument("--stack", default=None, metavar="NAME",
                       help="serve on this stack: the flag table and the rules follow the SGLang and flashinfer of its "
                       "uv.lock, and the profile must be made for it (default: the profile's own runtime block)")
        p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                       help="override a flag, e.g. --set attention-backend=triton (null removes it); repeatable")
        p.add_argument("extra_args", nargs="*", metavar="-- EXTRA_ARG",
                       help="words appended after the profile's flags, like services.sglang.extraArgs (write them "
                       "after --)")
        p.add_argument("--flags-table", type=Path,
                       help="flag table JSON (default modules/sglang-flags/<the runtime's sglang version>.json)")
        p.add_argument("--json", action="store_true", help="print JSON")

    p = serve_sub.add_parser("render", help="print the exact SGLang argv and environment")
    common(p)
    p.set_defaults(func=cmd_render)

    p = serve_sub.add_parser("check", help="evaluate every rule; exit 1 on errors")
    common(p)
    p.add_argument("--module-config", type=Path, metavar="FILE",
                   help="what services.sglang rendered (its build-time check): its settings, extraArgs, environment, "
                   "ignored rules and argv, checked with --profile")
    p.set_defaults(func=cmd_check)

    p = serve_sub.add_parser("run", help="check, then exec python -m sglang.launch_server with the rendered argv")
    common(p)
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.add_argument("--python", default=sys.executable,
                   help="the Python that has sglang: the serving venv's bin/python (default: this one); checked "
                   "before SGLang is started")
    p.set_defaults(func=cmd_run)

    p = serve_sub.add_parser(
        "pin-model", help="pin the profile's checkpoint: its commit and each file's hash, from the Hugging Face API",
        description="Reads the Hugging Face API (on a host that reaches it) and writes a manifest beside the "
        "profile: the commit the revision names, and every file with its sha256 (LFS) or git blob id.",
        epilog="exit codes: 0 written; 2 bad profile or output; 4 the API could not be reached or answered otherwise")
    p.add_argument("--profile", default=None, help=f"profile name or JSON path (default: {DEFAULT_PROFILE})")
    p.add_argument("--revision", default=None, help="a branch, tag or commit of the model's repository (default: "
                   "the profile's model.revision, else main)")
    p.add_argument("--endpoint", default=None, help=f"the Hub (default: $HF_ENDPOINT, else {model_pin.DEFAULT_ENDPOINT})")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: modules/models/PROFILE.json, beside the profiles)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON too")
    p.set_defaults(func=cmd_pin_model)


def cmd_pin_model(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    out = check_output_path(args.out or model_pin.manifest_path(profile.path), "--out")  # before any request
    repo = profile.data["model"]["id"]
    revision = args.revision or profile.data["model"].get("revision") or "main"
    manifest = model_pin.pin(repo, revision, base=model_pin.endpoint(args.endpoint))
    atomic_write_json(out, manifest)
    if args.json:
        dump_json(manifest)
        return 0
    files = manifest["files"]
    hashed = sum("sha256" in f for f in files.values())
    print(f"{repo} at {revision}: commit {manifest['revision']}")
    print(f"wrote {out}: {output.counted(len(files), 'file')} ({hashed} with their sha256 from LFS, the others by "
          "git blob id)")
    print(f"  pin it: services.sglang.model.revision = \"{manifest['revision']}\"; or set model.revision in "
          f"{profile.path}; or --set revision={manifest['revision']}")
    return 0


def _service(args: argparse.Namespace) -> Service:
    stack = stack_data.load(args.stack) if args.stack else None
    return configure(args.profile, stack=stack, settings=args.settings, extra_args=args.extra_args,
                     table_path=args.flags_table)


def cmd_render(args: argparse.Namespace) -> int:
    """The command line; exit 1 when a rule says error (it is printed as one: an error line is a failing exit)."""
    service = _service(args)
    rendered, runtime = service.rendered, service.runtime
    if args.json:
        dump_json({"profile": rendered.profile, "runtime": {**runtime.context(), "source": runtime.source},
                   "argv": rendered.argv, "env": rendered.env, "verdicts": [asdict(v) for v in service.verdicts if v.fired]})
    else:
        heading(f"SGLang command ({rendered.profile}; sglang {runtime.sglang}, flashinfer {runtime.flashinfer})")
        print(command_line(rendered))
        heading("environment")
        env = service.profile.data["env"]
        table(["variable", "value", "reason"],
              [(k, v, env.get(k, {}).get("reason", "set with --set")) for k, v in rendered.env.items()])
        _print_fired(service.verdicts)
    return int(ExitCode.CHECK_FAILED if service.fired("error") else ExitCode.OK)


def _print_fired(verdicts: list[Verdict]) -> None:
    for v in verdicts:
        for msg in v.messages:
            print(f"{v.severity}: [{v.id}] {msg}", file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    if args.module_config is not None:
        return _check_module(args)
    service = _service(args)
    errors, runtime = service.fired("error"), service.runtime
    unverified = service.profile.unverified()
    if args.json:
        dump_json({"profile": service.rendered.profile, "ok": not errors,
                   "runtime": {**runtime.context(), "source": runtime.source}, "verdicts": [asdict(v) for v in service.verdicts],
                   "unverified": [{"name": n, "reason": r} for n, r in unverified]})
    else:
        _print_check(service, unverified, every=args.verbose)
    return int(ExitCode.CHECK_FAILED if errors else ExitCode.OK)


def _print_check(service: Service, unverified: list[tuple[str, str]], *, every: bool) -> None:
    """Failures and warnings first, each whole with its fix; the rules that pass as a count (-v: a table of all)."""
    verdicts = service.verdicts
    errors, warnings, runtime = service.fired("error"), service.fired("warning"), service.runtime
    heading(f"serve check ({service.rendered.profile}; sglang {runtime.sglang}, flashinfer {runtime.flashinfer})")
    for v in [*errors, *warnings]:
        for msg in v.messages:
            paragraph(f"{'FAIL' if v.severity == 'error' else 'WARN'} [{v.id}] {msg}")
        if v.fix:
            paragraph(f"fix: --set {v.fix['flag'].lstrip('-')}={v.fix['value']}", indent="     ")
    if unverified:
        heading("profile entries not verified for this stack")
        table(["flag or variable", "why"], unverified)
    quiet = [v for v in verdicts if not v.fired]
    if every:
        heading("every rule")
        quiet_words = {"yes": "ok", "no": "n/a", "unknown": "ok (unchecked version)"}
        table(["rule", "severity", "verdict", "detail"],
              [(v.id, v.severity, ("FAIL" if v.severity == "error" else "WARN") if v.fired else quiet_words[v.applies],
                "; ".join(v.messages) or v.note or "-") for v in verdicts])
    outside = sum(v.applies == "no" for v in quiet)
    print()
    paragraph(f"{output.counted(len(errors), 'error')}, {output.counted(len(warnings), 'warning')}, "
          f"{output.counted(len(unverified), 'unverified profile entry', 'unverified profile entries')}; "
          f"{len(quiet)} of {output.counted(len(verdicts), 'rule')} pass"
          + (f" ({outside} {'does' if outside == 1 else 'do'} not apply to sglang {runtime.sglang})" if outside else "")
          + ("" if every else "; -v lists every rule"))


def _check_module(args: argparse.Namespace) -> int:
    """services.sglang's build-time check: every refusal on stderr, one line each, naming its option."""
    if args.settings or args.extra_args or args.stack:
        raise StackError("--module-config carries the settings, extraArgs and runtime itself",
                         "pass only --profile with it")
    config = module_check.load(args.module_config)
    service = configure(args.profile, overrides=config["overrides"], extra_args=config["extraArgs"],
                        env_overrides=config["env"], table_path=args.flags_table)
    errors, warnings = module_check.report(service, config)
    for line in [*(f"warning: {w}" for w in warnings), *(f"error: {e}" for e in errors)]:
        print(line, file=sys.stderr)
    if args.json:
        dump_json({"profile": service.rendered.profile, "ok": not errors, "errors": errors, "warnings": warnings})
    else:
        print(f"services.sglang ({service.rendered.profile}): {len(errors)} error(s), {len(warnings)} warning(s)")
    return int(ExitCode.CHECK_FAILED if errors else ExitCode.OK)


def cmd_run(args: argparse.Namespace) -> int:
    service = _service(args)
    rendered, errors = service.rendered, service.fired("error")
    _print_fired(service.verdicts)
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
    check_sglang(args.python, service.runtime.sglang)
    env = {**os.environ, **rendered.env}
    proc.echo(argv)
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        raise StackError(f"cannot start {argv[0]}: {exc}", "pass --python with the interpreter that has sglang installed") from exc
