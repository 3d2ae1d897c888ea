"""The flag table, extracted statically from the real sglang 0.5.9 wheel (PyPI, cached)."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys

import pytest

from blackwell_stack import pypi
from blackwell_stack.errors import StackError
from blackwell_stack.serve import flags
from blackwell_stack.serve.profile import load_profile
from blackwell_stack.serve.render import canonical

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def wheel(pypi_file):
    return pypi_file("sglang", "0.5.9", "sglang-0.5.9-py3-none-any.whl")


@pytest.fixture(scope="module")
def extracted(wheel):
    return flags.extract_wheel(wheel)


def test_committed_table_is_what_the_wheel_gives(extracted, repo):
    committed = json.loads((repo / "modules" / "sglang-flags.json").read_text())
    assert committed == extracted, "regenerate: " + committed["generator_command"]


def test_recorded_hash_is_pypis(extracted):
    registry = pypi.pick(pypi.release_files("sglang", "0.5.9"), "sglang-0.5.9-py3-none-any.whl")
    assert extracted["wheel"]["sha256"] == registry.sha256
    assert extracted["wheel"]["filename"] == registry.filename


def test_known_flags_choices_and_defaults(extracted):
    f = extracted["flags"]
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
    # What cannot be resolved statically is recorded, not guessed.
    assert f["--reasoning-parser"]["choices"] is None
    assert f["--reasoning-parser"]["choices_unresolved"] == "list(ReasoningParser.DetectorMap.keys())"


def test_default_profile_is_accepted(extracted):
    profile = load_profile()
    for flag, spec in profile.data["flags"].items():
        primary, _ = canonical(flag, extracted)
        assert primary is not None, flag
        choices = extracted["flags"][primary]["choices"]
        if choices is not None:
            assert spec["value"] in choices, (flag, spec["value"])


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
    # The suggestion is computed with edit distance so that Nix can compute the same one;
    # on these misspellings it agrees with difflib's closest match.
    assert difflib.get_close_matches(typo, list(extracted["options"]), n=1) == [meant]


def test_unique_prefix_is_accepted_like_argparse(extracted):
    assert canonical("--tp", extracted) == ("--tensor-parallel-size", [])
    primary, candidates = canonical("--disable", extracted)
    assert primary is None and len(candidates) > 1


def test_extract_command_regenerates_the_file(wheel, tmp_path, repo):
    out = tmp_path / "flags.json"
    result = subprocess.run(
        [sys.executable, "-m", "blackwell_stack", "serve", "flags", "extract", "--wheel", str(wheel), "--output", str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text()) == json.loads((repo / "modules" / "sglang-flags.json").read_text())


def test_not_a_wheel_is_a_clear_error(tmp_path):
    bogus = tmp_path / "sglang-0.5.9-py3-none-any.whl"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(StackError, match="not an sglang wheel"):
        flags.extract_wheel(bogus)
    with pytest.raises(StackError, match="no such file"):
        flags.extract_wheel(tmp_path / "missing.whl")


def test_source_without_add_argument_is_refused():
    with pytest.raises(StackError, match="no parser.add_argument"):
        flags.extract_source("x = 1\n")
