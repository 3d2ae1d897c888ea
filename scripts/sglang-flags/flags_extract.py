"""SGLang's flag table from an sglang wheel, read from SGLang's own parser (a maintainer's script).

    python scripts/sglang-flags/flags_extract.py --wheel sglang-0.5.9-py3-none-any.whl [--output FILE] [--python PY]

A child process (parser_probe.py) builds `ServerArgs.add_cli_args` from the
wheel and reports the parser's actions: with the wheel's other `sglang.*`
modules stood in (they import torch), or, given `--python` of an environment
that has this sglang installed, with everything real. A choice or default that
only a stand-in could give is recorded as unresolved, with the name it was
reached by. The table also holds argparse's decisions about every option
string a user may write (flags_decisions.py), for lib/sglang-service.nix.
Without --output the table goes beside the others, named by the wheel's version.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src")]

import flags_decisions  # noqa: E402
import parser_probe  # noqa: E402

from blackwell_stack import inputfiles, proc  # noqa: E402
from blackwell_stack.cli import boundary  # noqa: E402
from blackwell_stack.errors import ExitCode, StackError  # noqa: E402
from blackwell_stack.fileio import atomic_write_bytes, check_output_path  # noqa: E402
from blackwell_stack.hashes import hex_to_sri, sha256_file  # noqa: E402
from blackwell_stack.serve.flags import GENERATOR, SCHEMA_VERSION, table_path  # noqa: E402

SERVER_ARGS = "sglang/srt/server_args.py"
# The wheel a table is extracted from: the pure wheel where there is one (0.5.9),
# else the CPython 3.12 x86_64 one that the stacks install (0.5.23 ships only platform wheels).
WHEEL_HINT = "sglang-{version}-py3-none-any.whl or sglang-{version}-cp312-cp312-manylinux_2_34_x86_64.whl"
TAKES = {0: "none", None: "one", "?": "optional", "*": "many", "+": "many", 1: "one"}


def _entry(action: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """(option strings, the table's entry) of one parser action, as parser_probe.py reports it."""
    options = action["options"]
    negations = [o for o in options if action["action"] == "BooleanOptionalAction" and o.startswith("--no-")
                 and "--" + o[len("--no-"):] in options]
    names = [o for o in options if o not in negations]
    return names, {
        "dest": action["dest"], "aliases": names[1:], "action": action["action"], "type": action["type"],
        "nargs": action["nargs"], "takes_value": TAKES.get(action["nargs"], "many"),
        **{k: action[k] for k in ("choices", "choices_unresolved", "default", "default_unresolved", "required")},
        "negations": negations,
    }


def table_of(actions: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """{"flags", "options", decisions} from the parser's actions in registration order."""
    flags: dict[str, dict[str, Any]] = {}
    options: dict[str, str] = {}
    for names, entry in map(_entry, actions):
        flags[names[0]] = entry
        for name in names + entry["negations"]:
            options[name] = names[0]
    if not flags:
        raise StackError(f"{label}: SGLang's parser has no options", "is this an sglang wheel? check it")
    return {"flags": flags, "options": dict(sorted(options.items())), **flags_decisions.decisions(flags, options)}


def _installed_version(python: str) -> str | None:
    code, out = proc.probe([python, "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
                           stdout_only=True, timeout=60)
    return out if code == 0 else None


def parser_actions(wheel: Path, version: str, python: str | None) -> tuple[list[dict[str, Any]], str]:
    """SGLang's parser actions for `wheel`, and how it was built ("installed" or "stand-ins")."""
    interpreter = python or sys.executable
    mode = "installed" if python and _installed_version(python) == version else "stand-ins"
    source = Path(parser_probe.__file__).read_text()  # run with -c: the child imports nothing of this project
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    result = proc.run([interpreter, "-c", source, str(wheel), mode], env=env, check=False, timeout=300)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise StackError(
            f"{wheel.name}: SGLang's parser could not be built with {interpreter} ({mode}): {last}",
            "install what it names into that interpreter (sglang 0.5.2x needs msgspec), or pass --python with "
            "the stack's environment",
        )
    try:
        return json.loads(result.stdout)["actions"], mode
    except (ValueError, KeyError, TypeError) as exc:
        raise StackError(f"{wheel.name}: the parser probe printed no report ({exc})",
                         "run it again with -v to see the command") from None


def extract_wheel(wheel: Path, python: str | None = None) -> dict[str, Any]:
    """The flag table of an sglang wheel, with the wheel's name and hashes recorded."""
    wheel = Path(wheel)
    inputfiles.regular_file(wheel, hint="download it with `pip download sglang==<version> --no-deps`")
    version = _wheel_version(wheel.name)
    hint = "pass the sglang wheel from PyPI: " + WHEEL_HINT.format(version=version)
    try:
        with zipfile.ZipFile(wheel) as zf:
            if SERVER_ARGS not in zf.namelist():
                raise StackError(f"{wheel}: not an sglang wheel with {SERVER_ARGS}", hint)
    except zipfile.BadZipFile as exc:
        raise StackError(f"{wheel}: not an sglang wheel with {SERVER_ARGS} ({exc})", hint) from exc
    actions, mode = parser_actions(wheel, version, python)
    table = table_of(actions, wheel.name)
    digest = sha256_file(wheel)
    return {
        "schema_version": SCHEMA_VERSION,
        "description": (
            "Flags accepted by sglang's launch_server: the actions of SGLang's own parser "
            "(ServerArgs.add_cli_args) built from the wheel below, "
            + ("in an environment with this sglang installed. " if mode == "installed" else
               "with its sglang modules other than server_args and arg_groups stood in; a choice or default only a "
               "stand-in could give is unresolved, with the name it was reached by. ")
            + "Choices held in module-level lists can be extended at run time by plugins; the table holds what the "
            "wheel ships. `options`, `abbreviations`, `ambiguous` and `negated` are argparse's reading of every "
            "option string a user may write (exact spellings, accepted prefixes, refused prefixes with what they "
            "could mean, --no-X spellings), computed here so that lib/sglang-service.nix looks them up. "
            "Generated data: do not edit by hand."
        ),
        "sglang_version": version,
        "wheel": {
            "filename": wheel.name,
            "sha256": digest,
            "hash": hex_to_sri(digest),
            "hash_source": "sha256 of the wheel file computed here; the extractor's test checks it against PyPI's registry sha256",
        },
        "parser": mode,
        "generator_command": GENERATOR.format(wheel=wheel.name, version=version),
        **table,
    }


def _wheel_version(filename: str) -> str:
    parts = filename.split("-")
    if len(parts) < 3 or not filename.endswith(".whl"):
        raise StackError(f"{filename}: not a wheel file name", "expected " + WHEEL_HINT.format(version="<version>"))
    return parts[1]


def default_output(wheel: Path) -> Path:
    """Where the table of `wheel` goes without --output: beside the others, by its version."""
    return table_path(_wheel_version(Path(wheel).name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, required=True,
                        help="the sglang wheel (" + WHEEL_HINT.format(version="<version>") + ")")
    parser.add_argument("--output", type=Path, default=None, help="where to write (default modules/sglang-flags/<version>.json)")
    parser.add_argument("--python", default=None, help="the interpreter that builds the parser: one with this sglang "
                        "installed imports it for real; otherwise its other sglang modules are stood in (default: this "
                        "one; sglang 0.5.2x needs msgspec there)")
    args = parser.parse_args(argv)
    try:
        # Checked before the wheel is read.
        out = check_output_path(args.output or default_output(args.wheel), "--output")
        data = extract_wheel(args.wheel, args.python)
        atomic_write_bytes(out, flags_decisions.render_table(data).encode())
    except Exception as exc:  # one message and exit code, as the CLI gives them
        failure = boundary.describe(exc)
        print(f"error: {failure.message}", file=sys.stderr)
        return int(failure.code)
    print(f"{out}: {len(data['flags'])} flags of sglang {data['sglang_version']} ({data['wheel']['filename']}, "
          f"sha256 {data['wheel']['sha256']})")
    return int(ExitCode.OK)


if __name__ == "__main__":
    raise SystemExit(main())
