"""The flag tables, one per SGLang version, extracted from SGLang's own parser built from the real sglang
wheels (PyPI, cached): 0.5.9 (add_argument calls) and 0.5.23 (annotated dataclass fields); the committed
tables are still what the extractor gives."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile

import pytest
from support import scripts

from blackwell_stack import pypi
from blackwell_stack.data.profile import available_profiles, load_profile
from blackwell_stack.errors import StackError
from blackwell_stack.serve import flags
from blackwell_stack.serve.render import canonical

pytestmark = pytest.mark.network

flags_extract = scripts.load("scripts/sglang-flags/flags_extract.py")
EXTRACT = [sys.executable, flags_extract.__file__]

WHEELS = {
    "0.5.9": "sglang-0.5.9-py3-none-any.whl",
    # 0.5.23 ships only platform wheels; the stacks install the CPython 3.12 x86_64 one.
    "0.5.23": "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl",
}


@pytest.fixture(scope="module", params=sorted(WHEELS))
def version(request):
    return request.param


@pytest.fixture(scope="module")
def wheel(pypi_file, version):
    return pypi_file("sglang", version, WHEELS[version])


@pytest.fixture(scope="module")
def with_msgspec(msgspec_path):
    """The extractor's child finds msgspec as a user's interpreter would have it installed."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(msgspec_path))
        yield


@pytest.fixture(scope="module")
def extracted(wheel, with_msgspec):
    return flags_extract.extract_wheel(wheel)


@pytest.fixture(scope="module")
def v0_5_9(pypi_file, with_msgspec):
    return flags_extract.extract_wheel(pypi_file("sglang", "0.5.9", WHEELS["0.5.9"]))


@pytest.fixture(scope="module")
def v0_5_23(pypi_file, with_msgspec):
    return flags_extract.extract_wheel(pypi_file("sglang", "0.5.23", WHEELS["0.5.23"]))


def test_committed_table_is_what_the_wheel_gives(extracted, version, repo):
    committed = json.loads((repo / "modules" / "sglang-flags" / f"{version}.json").read_text())
    assert committed == extracted, "regenerate: " + committed["generator_command"]
    assert committed["sglang_version"] == version


def test_recorded_hash_is_pypis(extracted, version):
    registry = pypi.pick(pypi.release_files("sglang", version), WHEELS[version])
    assert extracted["wheel"]["sha256"] == registry.sha256
    assert extracted["wheel"]["filename"] == registry.filename


def test_every_committed_table_is_a_known_wheel(repo):
    assert flags.available_versions() == sorted(WHEELS, key=lambda v: [int(x) for x in v.split(".")])


def test_known_flags_choices_and_defaults_0_5_9(v0_5_9):
    f = v0_5_9["flags"]
    # The flag is spelled --fp4-gemm-backend; its dest keeps the old name (PR #16534).
    assert f["--fp4-gemm-backend"]["dest"] == "fp4_gemm_runner_backend"
    assert f["--fp4-gemm-backend"]["choices"] == ["auto", "flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_trtllm"]
    assert f["--fp4-gemm-backend"]["default"] == "flashinfer_cutlass"  # ServerArgs.fp4_gemm_runner_backend
    assert {"triton", "fa3", "trtllm_mha", "flashmla"} <= set(f["--attention-backend"]["choices"])
    assert "flashinfer_cutedsl" in f["--moe-runner-backend"]["choices"]
    assert f["--tensor-parallel-size"]["aliases"] == ["--tp-size"]
    assert f["--tensor-parallel-size"]["default"] == 1
    assert f["--disable-custom-all-reduce"]["takes_value"] == "none"
    assert f["--kv-cache-dtype"]["choices"][:3] == ["auto", "fp8_e5m2", "fp8_e4m3"]
    # A set literal (SAMPLING_BACKEND_CHOICES) is sorted; a starred list is expanded.
    assert f["--sampling-backend"]["choices"] == ["ascend", "flashinfer", "pytorch"]
    assert "unquant" in f["--speculative-draft-model-quantization"]["choices"]
    # A custom Action whose __init__ defaults nargs=0 takes no value.
    assert f["--hybrid-kvcache-ratio"]["takes_value"] == "none"
    # An integer product resolves (ServerArgs.speculative_ngram_capacity = 10 * 1000 * 1000).
    assert f["--speculative-ngram-capacity"]["default"] == 10_000_000
    # A value only a stood-in module could give is recorded with the name it was reached by, never guessed.
    assert f["--reasoning-parser"]["choices"] is None
    assert f["--reasoning-parser"]["choices_unresolved"] == (
        "sglang.srt.parser.reasoning_parser.ReasoningParser.DetectorMap.keys()[*]")
    assert f["--uvicorn-access-log-exclude-prefixes"]["default"] == []  # list(DEFAULT_...) of server_args.py
    assert all(e["negations"] == [] for e in f.values()) and v0_5_9["parser"] == "stand-ins"


def test_known_flags_choices_and_defaults_0_5_23(v0_5_23):
    f = v0_5_23["flags"]
    # Declared as fields: exec_.py `fp4_gemm_runner_backend: A[str, Arg(cli_name="--fp4-gemm-backend", ...)] = "auto"`.
    e = f["--fp4-gemm-backend"]
    assert (e["dest"], e["default"]) == ("fp4_gemm_runner_backend", "auto")
    # The choices list lives in arg_groups/choices.py: resolved across modules. No b12x backend yet.
    assert e["choices"] == ["auto", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_trtllm", "marlin"]
    assert f["--moe-runner-backend"]["default"] == "auto"
    assert {"fa3", "fa4", "trtllm_mha", "triton", "cutedsl_mla"} <= set(f["--attention-backend"]["choices"])
    assert "cutlass_mla" not in f["--attention-backend"]["choices"]
    assert "modelopt_mixed" in f["--quantization"]["choices"]
    assert {"bf16", "nvfp4", "fp4_mx_block16"} <= set(f["--kv-cache-dtype"]["choices"])
    # The primary spelling moved: --tp-size, with --tensor-parallel-size as alias (field tp_size).
    assert "--tensor-parallel-size" not in f
    assert f["--tp-size"]["aliases"] == ["--tensor-parallel-size"] and f["--tp-size"]["type"] == "int"
    assert v0_5_23["options"]["--tensor-parallel-size"] == "--tp-size"
    assert f["--dist-init-addr"]["aliases"] == ["--nccl-init-addr"]
    # A field without a default is required; bool fields are store_true.
    assert f["--model-path"]["required"] is True and f["--model-path"]["aliases"] == ["--model"]
    assert f["--disable-custom-all-reduce"]["action"] == "store_true"
    # argparse.BooleanOptionalAction adds --no-X, which stores False.
    assert f["--enable-tf32-matmul"]["negations"] == ["--no-enable-tf32-matmul"]
    assert v0_5_23["options"]["--no-enable-tf32-matmul"] == "--enable-tf32-matmul"
    # server_args.py's own flags: a custom action imported from argparse_actions.py (nargs=0, default=False),
    # and default=_declared_default(...) resolved from the field.
    assert f["--disable-cuda-graph"]["takes_value"] == "none" and f["--disable-cuda-graph"]["default"] is False
    assert f["--monokernel-backend"]["takes_value"] == "one" and f["--monokernel-backend"]["choices"] == ["amd"]
    assert f["--reasoning-parser"]["default"] is None and f["--reasoning-parser"]["default_unresolved"] is None
    # A local variable and a default_factory: what the parser holds, which no reading of the source gave.
    assert f["--sampling-backend"]["choices"] == ["ascend", "flashinfer", "intel_xpu", "pytorch", "token_oracle"]
    assert f["--uvicorn-access-log-exclude-prefixes"]["default"] == []


def test_every_profile_is_accepted_by_its_runtimes_table():
    for name in available_profiles():
        profile = load_profile(name)
        table = flags.load_table(profile.runtime().sglang).data
        for flag, spec in profile.data["flags"].items():
            primary, _ = canonical(flag, table)
            assert primary is not None, (name, flag)
            choices = table["flags"][primary]["choices"]
            if choices is not None:
                assert spec["value"] in choices, (name, flag, spec["value"])


@pytest.mark.parametrize(
    "typo, meant",
    [
        ("--fp4-gemm-runner-backend", "--fp4-gemm-backend"),  # the write-ups' spelling: a dest match
        ("--attention-backed", "--attention-backend"),
        ("--disable-custom-allreduce", "--disable-custom-all-reduce"),
        ("--kv-cache-dtpye", "--kv-cache-dtype"),
    ],
)
def test_misspellings_are_rejected_with_a_suggestion(extracted, typo, meant):
    assert canonical(typo, extracted)[0] is None
    assert flags.suggest(typo, extracted) == meant



def test_unique_prefix_is_accepted_like_argparse(extracted):
    assert canonical("--tp", extracted)[0] in ("--tensor-parallel-size", "--tp-size")
    primary, candidates = canonical("--disable", extracted)
    assert primary is None and len(candidates) > 1


def test_extract_command_regenerates_the_file(wheel, version, tmp_path, repo, msgspec_path):
    out = tmp_path / "flags.json"
    result = subprocess.run(
        [*EXTRACT, "--wheel", str(wheel), "--output", str(out)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(msgspec_path)},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text()) == json.loads((repo / "modules" / "sglang-flags" / f"{version}.json").read_text())


def test_without_what_the_parser_imports_it_says_what_to_install(pypi_file, tmp_path):
    if importlib.util.find_spec("msgspec") is not None:
        pytest.skip("msgspec is installed in this interpreter")
    wheel = pypi_file("sglang", "0.5.23", WHEELS["0.5.23"])
    result = subprocess.run(
        [*EXTRACT, "--wheel", str(wheel), "--output", str(tmp_path / "t.json")], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
    assert result.returncode == 2 and "No module named 'msgspec'" in result.stderr and "--python" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "t.json").exists()


def _wheel_with(tmp_path, server_args: str):
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("sglang/srt/server_args.py", server_args)
    return wheel


def test_not_a_wheel_is_a_clear_error(tmp_path):
    bogus = tmp_path / "sglang-0.5.9-py3-none-any.whl"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(StackError, match="not an sglang wheel"):
        flags_extract.extract_wheel(bogus)
    with pytest.raises(StackError, match="no such file"):
        flags_extract.extract_wheel(tmp_path / "missing.whl")


def test_a_parser_with_no_options_or_that_fails_is_refused(tmp_path):
    empty = "class ServerArgs:\n    @staticmethod\n    def add_cli_args(parser):\n        pass\n"
    with pytest.raises(StackError, match="has no options"):
        flags_extract.extract_wheel(_wheel_with(tmp_path, empty))
    with pytest.raises(StackError, match=r"could not be built.*ZeroDivisionError"):
        flags_extract.extract_wheel(_wheel_with(tmp_path, "1 / 0\n"))
