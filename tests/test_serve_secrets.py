"""Keys on the command line are refused by the parsed flag, in every spelling.

Three guards read a command line the way SGLang's argparse does:
lib/sglang-service.nix `secretFlagsIn` (services.sglang's assertion),
blackwell_stack.serve.secrets (`serve check/run`) and the launcher's last check
(serve/launcher.py). They are compared with each other, and with argparse
itself: a parser built from the flag table here, and sglang 0.5.9's own parser
(built from the wheel's server_args.py, network test below).

Soundness: whenever argparse would set a key, every guard refuses.
Precision: when argparse parses the line without a key, the parsed-flag guards
let it through (the launcher may refuse more: it sees only spellings).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blackwell_stack.data.profile import load_profile, load_rules
from blackwell_stack.serve import flags, launcher
from blackwell_stack.serve.render import render
from blackwell_stack.serve.secrets import SECRET_FLAGS, secret_flags_in

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

TABLE = flags.load_table()
RULES = load_rules()
PROFILE = load_profile()

SPELLINGS = [
    ["--api-key", "sk-1"], ["--api-key=sk-1"], ["--api-ke", "sk-1"], ["--api-k", "sk-1"], ["--api-k=sk-1"], ["--api", "sk-1"],
    ["--api=sk-1"], ["--api-", "sk-1"], ["--admin-api-key", "sk-1"], ["--admin-api-key=sk-1"], ["--admin", "sk-1"],
    ["--adm=sk-1"], ["--ad", "sk-1"], ["--a", "sk-1"], ["--a=sk-1"], ["--api-key"],
    ["--enable-metrics", "--api-k", "sk-1", "--tp", "8"], ["--tp", "8"], ["--enable-metrics"],
    ["--served-model-name", "api-key"], ["--api-keys", "sk-1"], ["-api-key", "sk-1"], ["--", "--api-key", "sk-1"],
]


def table_parser() -> argparse.ArgumentParser:
    """argparse with every option string of the flag table, taking values as the table says."""
    parser = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    for primary, entry in TABLE.data["flags"].items():
        names = [primary, *entry["aliases"]]
        takes = entry["takes_value"]
        if takes == "none":
            parser.add_argument(*names, dest=entry["dest"], action="store_true")
        else:
            nargs = {"one": None, "optional": "?", "many": "*"}[takes]
            parser.add_argument(*names, dest=entry["dest"], nargs=nargs)
    return parser


PARSER = table_parser()


def argparse_keys(args: list[str]) -> list[str] | None:
    """The key flags argparse sets for `args`, or None when argparse refuses the line."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            ns = PARSER.parse_args(args)
    except (argparse.ArgumentError, SystemExit):
        return None
    return [f for f in SECRET_FLAGS if getattr(ns, TABLE.data["flags"][f]["dest"]) is not None]


def python_guard(args: list[str]) -> list[str]:
    rendered = render(PROFILE, TABLE, RULES, {}, args)
    return secret_flags_in(rendered, TABLE.data)


def nix_guard(nix, cases: list[list[str]], tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    return nix.eval(
        "let s = import ./lib/sglang-service.nix; in "
        f"map (a: s.secretFlagsIn {{ rendered = s.render {{ extraArgs = a; }}; }}) (builtins.fromJSON (builtins.readFile {path}))"
    )


def check(args: list[str], guarded: list[str]) -> None:
    keys = argparse_keys(args)
    if keys:
        assert set(keys) <= set(guarded), (args, keys, guarded)
    elif keys == []:
        assert guarded == [], (args, guarded)
    spelled = launcher.key_flags_on(args)
    if keys:
        assert set(keys) <= set(spelled), (args, keys, spelled)


def test_the_fixed_spellings(nix, tmp_path):
    nix_results = nix_guard(nix, SPELLINGS, tmp_path)
    for args, from_nix in zip(SPELLINGS, nix_results):
        from_python = python_guard(args)
        assert from_nix == from_python, args
        check(args, from_python)
    # What each guard says, spelled out for the cases the issue names.
    assert python_guard(["--api-k", "sk-1"]) == ["--api-key"]
    assert python_guard(["--api=sk-1"]) == ["--api-key"]
    assert python_guard(["--adm=sk-1"]) == ["--admin-api-key"]
    assert python_guard(["--a", "sk-1"]) == ["--api-key", "--admin-api-key"]  # ambiguous: refused by argparse too
    assert python_guard(["--served-model-name", "api-key"]) == []
    assert argparse_keys(["--api-k", "sk-1"]) == ["--api-key"]


def test_settings_in_any_spelling_count(tmp_path):
    rendered = render(PROFILE, TABLE, RULES, {"api-k": "sk-1"}, [])
    assert secret_flags_in(rendered, TABLE.data) == ["--api-key"]
    rendered = render(PROFILE, TABLE, RULES, {"--a": "sk-1"}, [])
    assert secret_flags_in(rendered, TABLE.data) == ["--api-key", "--admin-api-key"]


OPTION_NAMES = sorted(TABLE.data["options"])
KEY_PREFIXES = ["--api-key", "--api-ke", "--api-k", "--api", "--a", "--admin-api-key", "--admin-api", "--adm", "--ad"]


@st.composite
def flag_words(draw):
    """One flag as a user might write it: full or abbreviated, its value separate or after =."""
    key = draw(st.booleans()) and draw(st.integers(0, 3)) == 0
    option = draw(st.sampled_from(KEY_PREFIXES if key else OPTION_NAMES))
    if not key and draw(st.booleans()):
        option = option[: draw(st.integers(3, len(option)))]  # an abbreviation, maybe ambiguous
    # How many values follow: those of the first flag the spelling could mean.
    options = TABLE.data["options"]
    primary = options.get(option) or next((options[o] for o in OPTION_NAMES if o.startswith(option)), None)
    takes = TABLE.data["flags"][primary]["takes_value"] if primary else "one"
    value = draw(st.sampled_from(["sk-1", "8", "triton", "api-key"]))
    if takes == "none":
        return [option]
    if takes == "many":
        return [option, *draw(st.lists(st.just(value), max_size=2))]
    if takes == "optional" and draw(st.booleans()):
        return [option]
    return [f"{option}={value}"] if draw(st.booleans()) else [option, value]


COMMAND_LINES = st.lists(flag_words(), min_size=1, max_size=4).map(lambda groups: [w for g in groups for w in g])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cases=st.lists(COMMAND_LINES, min_size=60, max_size=60))
def test_generated_command_lines(nix, tmp_path, cases):
    nix_results = nix_guard(nix, cases, tmp_path)
    for args, from_nix in zip(cases, nix_results):
        from_python = python_guard(args)
        assert from_nix == from_python, args
        check(args, from_python)


def test_the_launcher_refuses_before_starting_anything(tmp_path):
    script = Path(launcher.__file__)
    result = subprocess.run([sys.executable, str(script), "--model-path", "m", "--api=sk-secret"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "--api-key on the command line is refused" in result.stderr
    assert "sk-secret" not in result.stderr


# --- sglang 0.5.9's own parser ------------------------------------------------------------------

@pytest.mark.network
def test_sglangs_own_parser_agrees(pypi_file, tmp_path):
    from test_serve_argparse import WHEELS, real_parser

    wheel = pypi_file("sglang", "0.5.9", WHEELS["0.5.9"][0])
    argvs = [["--model-path", "m", *args] for args in SPELLINGS]
    parses = real_parser(wheel, argvs)["parses"]
    for args, argv, parsed in zip(SPELLINGS, argvs, parses):
        guarded = python_guard(args)
        if not parsed["ok"]:
            continue  # sglang refuses the line; the guards may or may not
        keys = [f for f in SECRET_FLAGS if parsed["ns"][TABLE.data["flags"][f]["dest"]] is not None]
        assert set(keys) == set(guarded), (args, parsed["ns"].get("api_key"), guarded)
        assert set(keys) <= set(launcher.key_flags_on(argv)), args
        # The parser built from the table here reads the line the same way.
        assert argparse_keys(args) == keys, args
    # sglang takes every abbreviation the issue worries about.
    by_args = {json.dumps(a): p for a, p in zip(SPELLINGS, parses)}
    for spelled in (["--api-k", "sk-1"], ["--api=sk-1"], ["--adm=sk-1"]):
        assert by_args[json.dumps(spelled)]["ok"], spelled
