"""The committed flag tables against SGLang's REAL parsers of sglang 0.5.9 and 0.5.23: the rendered argv
parsed by them, and every spelling the tables decide about read by them.

The parser is the one the extractor reports (scripts/sglang-flags/parser_probe.py, in a child process): the wheel's
server_args.py and arg_groups/ with the real msgspec from PyPI, every other `sglang.*` module stood in (they
import torch and need a GPU). That the tables are what the extractor gives is tests/test_serve_flags.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import scripts

from blackwell_stack.data.profile import load_profile, load_rules
from blackwell_stack.serve import flags
from blackwell_stack.serve.render import render

pytestmark = pytest.mark.network

parser_probe = scripts.load("scripts/sglang-flags/parser_probe.py")

# Runs in a child: parser_probe.py (the extractor's own probe) builds SGLang's real parser; this parses argvs
# with it and asks it how it reads each option string.
PARSE = r'''
import contextlib, io
def parse_all(wheel, argv_json, probes_path):
    parser = build_parser(wheel, "stand-ins")
    def plain_value(v):
        try:
            json.dumps(v)
            return v
        except TypeError:
            return "<unserializable>"
    parses = []
    for argv in json.loads(argv_json):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = parser.parse_args(argv)
            parses.append({"ok": True, "ns": {k: plain_value(v) for k, v in vars(ns).items()}})
        except (argparse.ArgumentError, SystemExit) as exc:
            parses.append({"ok": False, "error": f"{exc} {err.getvalue()}"})
    decisions = {}
    for option in (json.load(open(probes_path)) if probes_path != "-" else []):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                found = parser._parse_optional(option)
        except (argparse.ArgumentError, SystemExit):
            decisions[option] = {"ambiguous": True}
            continue
        if isinstance(found, list):  # Python >= 3.12.3 returns the matches as a list
            found = found[0] if len(found) == 1 else None
        if found is None or found[0] is None:
            decisions[option] = {"flag": None}
        else:
            decisions[option] = {"flag": found[0].option_strings[0], "option": found[1]}
    json.dump({"parses": parses, "decisions": decisions}, sys.stdout)
parse_all(*sys.argv[1:4])
'''

WHEELS = {
    "0.5.9": ("sglang-0.5.9-py3-none-any.whl", "qwen3.5-397b-a17b-nvfp4-sm120"),
    "0.5.23": ("sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl", "qwen3.5-397b-a17b-nvfp4-sm120-current"),
}
TP_DEST = {"0.5.9": "tensor_parallel_size", "0.5.23": "tp_size"}


@pytest.fixture(scope="module", params=sorted(WHEELS))
def version(request):
    return request.param


@pytest.fixture(scope="module")
def table(version):
    return flags.load_table(version).data


@pytest.fixture(scope="module")
def real(version, pypi_file, tmp_path_factory, table, msgspec_path):
    filename, profile_name = WHEELS[version]
    wheel = pypi_file("sglang", version, filename)
    default_argv = render(load_profile(profile_name), flags.load_table(version), load_rules()).argv
    argvs = [
        default_argv,
        default_argv + ["--fp4-gemm-runner-backend", "flashinfer_cudnn"],
        ["--model-path", "m", "--tp", "8"],
        default_argv + ["--attention-backend", "fa5"],
    ]
    probes = tmp_path_factory.mktemp("probe") / "probes.json"
    probes.write_text(json.dumps(sorted({*table["options"], *table["abbreviations"], *table["ambiguous"]})))
    return real_parser(wheel, argvs, probes, msgspec_path)


def real_parser(wheel: Path, argvs: list[list[str]], probes: Path | None = None, pythonpath: Path | None = None) -> dict:
    """{"parses": each argv as SGLang's real parser reads it, "decisions": how it reads each option of `probes`}."""
    script = Path(parser_probe.__file__).read_text() + PARSE
    env = {**os.environ, "PYTHONPATH": str(pythonpath or "")}
    result = subprocess.run([sys.executable, "-c", script, str(wheel), json.dumps(argvs), str(probes or "-")],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_the_rendered_command_parses_with_the_real_parser(real, version):
    ok = real["parses"][0]
    assert ok["ok"], ok
    ns = ok["ns"]
    assert ns["quantization"] == "modelopt_fp4"
    assert ns["attention_backend"] == "triton"
    assert ns["moe_runner_backend"] == "flashinfer_cutlass"
    assert ns["fp4_gemm_runner_backend"] == "flashinfer_cudnn"
    assert ns["disable_custom_all_reduce"] is True
    assert ns["kv_cache_dtype"] == "bf16"
    assert ns[TP_DEST[version]] == 8


def test_the_real_parser_agrees_on_what_is_refused(real, version):
    typo, abbreviated, bad_choice = real["parses"][1:]
    assert not typo["ok"] and "--fp4-gemm-runner-backend" in typo["error"]
    assert abbreviated["ok"] and abbreviated["ns"][TP_DEST[version]] == 8  # --tp, as write-ups spell it
    assert not bad_choice["ok"] and "fa5" in bad_choice["error"]


def test_the_tables_decisions_are_the_real_parsers(real, table):
    """Every exact spelling, abbreviation, ambiguous prefix and --no-X spelling in the table, read by the real
    parser: lib/sglang-service.nix and render.py look these up instead of reimplementing argparse."""
    decided = real["decisions"]
    for option, primary in table["options"].items():
        assert decided[option] == {"flag": primary, "option": option}, option
    for prefix, primary in table["abbreviations"].items():
        got = decided[prefix]
        if got.get("ambiguous"):  # argparse before 3.12.3 refuses a prefix of two spellings of the same flag
            assert {p for o, p in table["options"].items() if o.startswith(prefix)} == {primary}, prefix
        else:
            assert got["flag"] == primary, prefix
            if table["flags"][primary]["negations"]:  # BooleanOptionalAction stores False for a --no- spelling
                assert (prefix in table["negated"]) == got["option"].startswith("--no-"), prefix
    for prefix in table["ambiguous"]:
        assert decided[prefix] == {"ambiguous": True}, prefix
    for option, primary in table["negated"].items():
        assert decided[option]["flag"] == primary and decided[option]["option"].startswith("--no-"), option
