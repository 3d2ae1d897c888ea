"""Cross-check of the statically extracted flag tables against the REAL argparse
parsers of sglang 0.5.9 and 0.5.23, and the rendered argv parsed by them.

`ServerArgs.add_cli_args` from the wheel is run in a subprocess. The modules
that build the parser are the wheel's own: server_args.py (0.5.9), and from
0.5.23 also the field classes and add_cli_args_from_dataclass
(sglang/srt/arg_groups/{arg_utils,argparse_actions,choices,field_order,fields}),
with the real msgspec from PyPI. Every other `sglang.*` import pulls in torch
and a GPU, so those are stood in by empty modules there. What is compared is
the parser that the real code builds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from blackwell_stack.model.profile import load_profile, load_rules
from blackwell_stack.serve import flags
from blackwell_stack.serve.render import render

pytestmark = pytest.mark.network

PROBE = r'''
"""Build sglang's real argparse parser from a wheel's server_args.py, with the
rest of the sglang package stood in (it imports torch), and report it."""
import argparse, contextlib, importlib.abc, importlib.machinery, io, json, sys, types, zipfile
from unittest import mock

class _Stub(types.ModuleType):
    __path__ = []
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = mock.MagicMock(name=f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value

class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """sglang.* modules: the wheel's own source for those named real, empty stand-ins for the rest."""
    def __init__(self, zf, real):
        self.zf, self.real = zf, real
    def _source(self, name):
        if not any(name == r or name.startswith(r + ".") for r in self.real):
            return None
        base = name.replace(".", "/")
        for path in (base + ".py", base + "/__init__.py"):
            if path in self.zf.namelist():
                return path
    def find_spec(self, name, path, target=None):
        if name == "sglang" or name.startswith("sglang."):
            src = self._source(name)
            return importlib.machinery.ModuleSpec(name, self, origin=src, is_package=src is None or src.endswith("__init__.py"))
    def create_module(self, spec):
        if spec.origin is None:
            return _Stub(spec.name)
        module = types.ModuleType(spec.name)
        module.__file__ = spec.origin
        if spec.origin.endswith("__init__.py"):
            module.__path__ = []
        return module
    def exec_module(self, module):
        if getattr(module, "__file__", None):
            exec(compile(self.zf.read(module.__file__).decode(), module.__file__, "exec"), module.__dict__)

def main(wheel, real_json, argv_json, probes_path=None):
    zf = zipfile.ZipFile(wheel)
    sys.meta_path.insert(0, _Finder(zf, json.loads(real_json)))
    module = importlib.import_module("sglang.srt.server_args")
    parser = argparse.ArgumentParser(exit_on_error=False)
    module.ServerArgs.add_cli_args(parser)
    actions = {}
    for a in parser._actions:
        if not a.option_strings or a.option_strings == ["-h", "--help"]:
            continue
        def plain(v):
            try:
                json.dumps(v)
                return v
            except TypeError:
                return "<unserializable>"
        actions[a.option_strings[0]] = {
            "options": a.option_strings, "dest": a.dest, "nargs": a.nargs,
            # choices taken from a stood-in module are not the wheel's: left out of the comparison
            "choices": "<stand-in>" if isinstance(a.choices, mock.Mock) else (plain(list(a.choices)) if a.choices is not None else None),
            "default": plain(a.default), "kind": type(a).__name__,
        }
    parses = []
    for argv in json.loads(argv_json):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = parser.parse_args(argv)
            parses.append({"ok": True, "ns": {k: plain(v) for k, v in vars(ns).items()}})
        except (argparse.ArgumentError, SystemExit) as exc:
            parses.append({"ok": False, "error": f"{exc} {err.getvalue()}"})
    decisions = {}
    for option in (json.load(open(probes_path)) if probes_path else []):
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
    json.dump({"actions": actions, "parses": parses, "decisions": decisions}, sys.stdout)

if __name__ == "__main__":
    main(*sys.argv[1:])
'''

TAKES = {0: "none", None: "one", "?": "optional", "*": "many", "+": "many"}

# sglang version -> (wheel, the sglang modules that build the parser, the profile that runs it)
WHEELS = {
    "0.5.9": ("sglang-0.5.9-py3-none-any.whl", ["sglang.srt.server_args"], "qwen3.5-397b-a17b-nvfp4-sm120"),
    "0.5.23": (
        "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl",
        [
            "sglang.srt.server_args",
            "sglang.srt.arg_groups.arg_utils",
            "sglang.srt.arg_groups.argparse_actions",
            "sglang.srt.arg_groups.choices",
            "sglang.srt.arg_groups.field_order",
            "sglang.srt.arg_groups.fields",
        ],
        "qwen3.5-397b-a17b-nvfp4-sm120-current",
    ),
}
TP_DEST = {"0.5.9": "tensor_parallel_size", "0.5.23": "tp_size"}
MSGSPEC = "msgspec-0.22.0-cp{v}-cp{v}-manylinux2014_x86_64*.whl"  # sglang 0.5.23 needs msgspec (unpinned)


@pytest.fixture(scope="module")
def msgspec_dir(pypi_file, tmp_path_factory):
    """The real msgspec, from PyPI, for the Python running the tests."""
    tag = f"{sys.version_info.major}{sys.version_info.minor}"
    wheel = pypi_file("msgspec", "0.22.0", MSGSPEC.format(v=tag))
    out = tmp_path_factory.mktemp("msgspec")
    zipfile.ZipFile(wheel).extractall(out)
    return out


@pytest.fixture(scope="module", params=sorted(WHEELS))
def version(request):
    return request.param


@pytest.fixture(scope="module")
def table(version):
    return flags.load_table(version).data


@pytest.fixture(scope="module")
def real(version, pypi_file, tmp_path_factory, table, msgspec_dir):
    filename, real_modules, profile_name = WHEELS[version]
    wheel = pypi_file("sglang", version, filename)
    default_argv = render(load_profile(profile_name), table, load_rules()).argv
    argvs = [
        default_argv,
        default_argv + ["--fp4-gemm-runner-backend", "flashinfer_cudnn"],
        ["--model-path", "m", "--tp", "8"],
        default_argv + ["--attention-backend", "fa5"],
    ]
    script = tmp_path_factory.mktemp("probe") / "probe.py"
    script.write_text(PROBE)
    probes = script.parent / "probes.json"
    probes.write_text(json.dumps(sorted({*table["options"], *table["abbreviations"], *table["ambiguous"]})))
    env = {**os.environ, "PYTHONPATH": str(msgspec_dir)}
    result = subprocess.run(
        [sys.executable, str(script), str(wheel), json.dumps(real_modules), json.dumps(argvs), str(probes)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_every_real_flag_is_in_the_table_with_the_same_shape(real, table):
    assert set(real["actions"]) == set(table["flags"])
    for name, action in real["actions"].items():
        entry = table["flags"][name]
        assert [name] + entry["aliases"] + entry["negations"] == action["options"], name
        assert entry["dest"] == action["dest"], name
        assert entry["takes_value"] == TAKES[action["nargs"]], name
        if entry["choices"] is not None and action["choices"] != "<stand-in>":
            assert sorted(map(str, entry["choices"])) == sorted(map(str, action["choices"])), name
        if entry["default_unresolved"] is None and action["default"] != "<unserializable>":
            assert entry["default"] == action["default"], name


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
