"""Cross-check of the statically extracted flag table against sglang 0.5.9's REAL
argparse parser, and the rendered argv parsed by that parser.

`ServerArgs.add_cli_args` from the wheel's server_args.py is run in a
subprocess; server_args.py's own imports are all `sglang.*` modules (which pull
in torch and a GPU), so those are stood in by empty modules there. What is
compared is the parser that the real code builds.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from blackwell_stack.serve import flags
from blackwell_stack.serve.profile import load_profile, load_rules
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
    def find_spec(self, name, path, target=None):
        if name == "sglang" or name.startswith("sglang."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        return _Stub(spec.name)
    def exec_module(self, module):
        pass

def main(wheel, argv_json):
    sys.meta_path.insert(0, _Finder())
    source = zipfile.ZipFile(wheel).read("sglang/srt/server_args.py").decode()
    module = types.ModuleType("sglang.srt.server_args")
    module.__file__ = "server_args.py"
    sys.modules[module.__name__] = module
    exec(compile(source, "sglang/srt/server_args.py", "exec"), module.__dict__)
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
            "choices": plain(list(a.choices)) if a.choices is not None else None,
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
    json.dump({"actions": actions, "parses": parses}, sys.stdout)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''

TAKES = {0: "none", None: "one", "?": "optional", "*": "many", "+": "many"}


@pytest.fixture(scope="module")
def table():
    return flags.load_table().data


@pytest.fixture(scope="module")
def real(pypi_file, tmp_path_factory, table):
    wheel = pypi_file("sglang", "0.5.9", "sglang-0.5.9-py3-none-any.whl")
    default_argv = render(load_profile(), table, load_rules()).argv
    argvs = [
        default_argv,
        default_argv + ["--fp4-gemm-runner-backend", "flashinfer_cudnn"],
        ["--model-path", "m", "--tp", "8"],
        default_argv + ["--attention-backend", "fa5"],
    ]
    script = tmp_path_factory.mktemp("probe") / "probe.py"
    script.write_text(PROBE)
    result = subprocess.run([sys.executable, str(script), str(wheel), json.dumps(argvs)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_every_real_flag_is_in_the_table_with_the_same_shape(real, table):
    assert set(real["actions"]) == set(table["flags"])
    for name, action in real["actions"].items():
        entry = table["flags"][name]
        assert [name] + entry["aliases"] == action["options"], name
        assert entry["dest"] == action["dest"], name
        assert entry["takes_value"] == TAKES[action["nargs"]], name
        if entry["choices"] is not None:
            assert sorted(map(str, entry["choices"])) == sorted(map(str, action["choices"])), name
        if entry["default_unresolved"] is None and action["default"] != "<unserializable>":
            assert entry["default"] == action["default"], name


def test_the_rendered_command_parses_with_the_real_parser(real):
    ok = real["parses"][0]
    assert ok["ok"], ok
    ns = ok["ns"]
    assert ns["quantization"] == "modelopt_fp4"
    assert ns["attention_backend"] == "triton"
    assert ns["moe_runner_backend"] == "flashinfer_cutlass"
    assert ns["fp4_gemm_runner_backend"] == "flashinfer_cudnn"
    assert ns["disable_custom_all_reduce"] is True
    assert ns["kv_cache_dtype"] == "bf16"
    assert ns["tensor_parallel_size"] == 8


def test_the_real_parser_agrees_on_what_is_refused(real):
    typo, abbreviated, bad_choice = real["parses"][1:]
    assert not typo["ok"] and "--fp4-gemm-runner-backend" in typo["error"]
    assert abbreviated["ok"] and abbreviated["ns"]["tensor_parallel_size"] == 8  # --tp, as write-ups spell it
    assert not bad_choice["ok"] and "fa5" in bad_choice["error"]
