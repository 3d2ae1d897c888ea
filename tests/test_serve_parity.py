"""lib/sglang-service.nix and blackwell_stack.serve render the same argv and give the
same rule verdicts: on the default profile, on generated profiles (hypothesis),
and for every rule on a case that fires and one that does not.

Each batch of cases goes to ONE nix-instantiate call (a JSON file read with
builtins.fromJSON), so the suite stays fast.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blackwell_stack.serve import flags
from blackwell_stack.serve.profile import Profile, load_profile, load_rules
from blackwell_stack.serve.render import render
from blackwell_stack.serve.rules import evaluate

pytestmark = pytest.mark.nix

TABLE = flags.load_table()
RULES = load_rules()
DEFAULT = load_profile()

NIX_BATCH = """
let
  s = import ./lib/sglang-service.nix;
  cases = builtins.fromJSON (builtins.readFile {path});
in
map (c:
  let r = s.render {{ inherit (c) profile overrides extraArgs env rules; }}; in
  {{ inherit (r) argv env; verdicts = map (v: {{ inherit (v) id severity fired messages; }}) r.verdicts; }})
  cases
"""


def python_result(case: dict) -> dict:
    profile = Profile(Path("generated.json"), case["profile"])
    rendered = render(profile, TABLE, case["rules"], case["overrides"], case["extraArgs"], case["env"])
    verdicts = evaluate(rendered, case["rules"], TABLE.data)
    return {
        "argv": rendered.argv,
        "env": rendered.env,
        "verdicts": [{"id": v.id, "severity": v.severity, "fired": v.fired, "messages": v.messages} for v in verdicts],
    }


def nix_results(nix, cases: list[dict], tmp_dir: Path) -> list[dict]:
    path = tmp_dir / "cases.json"
    path.write_text(json.dumps(cases))
    return nix.eval(NIX_BATCH.format(path=path))


def case(profile=None, overrides=None, extra_args=None, env=None, rules=None) -> dict:
    return {
        "profile": profile or DEFAULT.data,
        "overrides": overrides or {},
        "extraArgs": extra_args or [],
        "env": env or {},
        "rules": rules or RULES,
    }


def patched(base: dict, patch: dict) -> dict:
    out = copy.deepcopy(base)
    for dotted, value in patch.items():
        *parents, last = dotted.split(".")
        node = out
        for p in parents:
            node = node[p]
        node[last] = value
    return out


def assert_same(nix, cases, tmp_path):
    got = nix_results(nix, cases, tmp_path)
    assert len(got) == len(cases)
    for c, n in zip(cases, got):
        assert python_result(c) == n, json.dumps(c)[:2000]


def test_default_profile_renders_the_working_command(nix, tmp_path):
    c = case()
    assert_same(nix, [c], tmp_path)
    result = python_result(c)
    argv = result["argv"]
    assert argv[:2] == ["--model-path", "nvidia/Qwen3.5-397B-A17B-NVFP4"]
    pairs = {
        "--quantization": "modelopt_fp4",
        "--attention-backend": "triton",
        "--moe-runner-backend": "flashinfer_cutlass",
        "--fp4-gemm-backend": "flashinfer_cudnn",
        "--kv-cache-dtype": "bf16",
        "--tensor-parallel-size": "8",
    }
    for flag, value in pairs.items():
        assert argv[argv.index(flag) + 1] == value
    assert "--disable-custom-all-reduce" in argv
    errors = [v for v in result["verdicts"] if v["fired"] and v["severity"] == "error"]
    assert errors == []
    assert result["env"] == {"NCCL_P2P_LEVEL": "4", "SGLANG_DISABLE_CUDNN_CHECK": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}


def test_extra_args_come_last_so_the_user_wins(nix, tmp_path):
    c = case(extra_args=["--attention-backend", "flashinfer"])
    assert_same(nix, [c], tmp_path)
    argv = python_result(c)["argv"]
    assert argv[-2:] == ["--attention-backend", "flashinfer"]
    assert argv.count("--attention-backend") == 2  # the profile's stays, argparse keeps the last


# --- every rule fires on one case and stays quiet on another, on both sides ------------------

FIX_KNOWN = patched(RULES, {"constants.flashinfer_fp4_cutlass_fix_version": "0.6.6"})

RULE_CASES = {
    "sglang-rejects-flag": (
        case(overrides={"fp4-gemm-runner-backend": "flashinfer_cudnn"}),
        case(overrides={"tp": 8}),
    ),
    "sm120-moe-flashinfer-trtllm": (
        case(overrides={"moe-runner-backend": "flashinfer_trtllm"}),
        case(profile=patched(DEFAULT.data, {"hardware.compute_capability": "10.0"}),
             overrides={"moe-runner-backend": "flashinfer_trtllm"}),
    ),
    "sm120-fp4-gemm-flashinfer-trtllm": (
        case(extra_args=["--fp4-gemm-backend=flashinfer_trtllm"]),
        case(extra_args=["--fp4-gemm-backend=flashinfer_cudnn"]),
    ),
    "sm120-moe-flashinfer-cutedsl": (
        case(extra_args=["--moe-runner-backend", "flashinfer_cutedsl"]),
        case(extra_args=["--moe-runner-backend", "flashinfer_cutlass"]),
    ),
    "sm120-fp4-gemm-cutlass-before-flashinfer-fix": (
        case(overrides={"fp4-gemm-backend": None}),  # 0.5.9's default is flashinfer_cutlass
        case(overrides={"fp4-gemm-backend": "flashinfer_cutlass"},
             profile=patched(DEFAULT.data, {"runtime.flashinfer": "0.6.10"}), rules=FIX_KNOWN),
    ),
    "sm120-attention-backend-without-kernels": (
        case(overrides={"decode-attention-backend": "fa3"}),
        case(overrides={"attention-backend": "flashinfer"}),
    ),
    "mla-attention-backend-on-non-mla-model": (
        case(overrides={"attention-backend": "flashmla"}),
        case(overrides={"attention-backend": "flashmla"}, profile=patched(DEFAULT.data, {"model.uses_mla": True})),
    ),
    "fp8-kv-cache-without-calibrated-scales": (
        case(overrides={"kv-cache-dtype": "fp8_e4m3"}),
        case(overrides={"kv-cache-dtype": "fp8_e4m3"},
             profile=patched(DEFAULT.data, {"model.kv_cache_scales_calibrated": True})),
    ),
    "kv-cache-dtype-auto": (
        case(overrides={"kv-cache-dtype": None}),
        case(),
    ),
    "custom-all-reduce-on-pcie": (
        case(overrides={"disable-custom-all-reduce": False}),
        case(overrides={"disable-custom-all-reduce": False},
             profile=patched(DEFAULT.data, {"hardware.interconnect": "nvlink"})),
    ),
    "tp-exceeds-gpus": (
        case(extra_args=["--tp", "16"]),
        case(extra_args=["--tp", "16", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000"]),
    ),
    "tp-leaves-gpus-idle": (
        case(overrides={"tp-size": 4}),
        case(overrides={"tp-size": "8"}),
    ),
    "multi-node-without-dist-init-addr": (
        case(overrides={"nnodes": 2, "tp-size": 16}),
        case(overrides={"nnodes": 2, "tp-size": 16, "dist-init-addr": "10.0.0.1:5000"}),
    ),
    "model-revision-unpinned": (
        case(),
        case(profile=patched(DEFAULT.data, {"model.id": "/var/lib/models/qwen3.5"})),
    ),
}


def test_every_rule_has_cases():
    assert set(RULE_CASES) == {r["id"] for r in RULES["rules"]}


def test_every_rule_fires_and_stays_quiet_on_both_sides(nix, tmp_path):
    ids = list(RULE_CASES)
    cases = [c for rid in ids for c in RULE_CASES[rid]]
    got = nix_results(nix, cases, tmp_path)
    for i, rid in enumerate(ids):
        for j, want in enumerate((True, False)):
            c, n = cases[2 * i + j], got[2 * i + j]
            py = python_result(c)
            assert py == n, (rid, want)
            fired = {v["id"]: v["fired"] for v in py["verdicts"]}
            assert fired[rid] is want, (rid, py["verdicts"])


def test_fired_messages_name_the_flag_and_the_fix():
    py = python_result(RULE_CASES["sm120-moe-flashinfer-trtllm"][0])
    (msg,) = [v for v in py["verdicts"] if v["id"] == "sm120-moe-flashinfer-trtllm"][0]["messages"]
    assert "--moe-runner-backend flashinfer_trtllm" in msg and "use flashinfer_cutlass" in msg
    py = python_result(RULE_CASES["sglang-rejects-flag"][0])
    (msg,) = [v for v in py["verdicts"] if v["id"] == "sglang-rejects-flag"][0]["messages"]
    assert "did you mean --fp4-gemm-backend?" in msg


# --- generated profiles ----------------------------------------------------------------------

def _choices(flag):
    return TABLE.flags[flag]["choices"]


FLAG_VALUES = {
    "moe-runner-backend": st.sampled_from(_choices("--moe-runner-backend") + ["bogus", None]),
    "fp4-gemm-backend": st.sampled_from(_choices("--fp4-gemm-backend") + [None]),
    "fp4-gemm-runner-backend": st.sampled_from(["flashinfer_cudnn"]),
    "attention-backend": st.sampled_from(_choices("--attention-backend") + [None]),
    "decode-attention-backend": st.sampled_from(["fa3", "triton", None]),
    "kv-cache-dtype": st.sampled_from(_choices("--kv-cache-dtype") + [None, "fp8"]),
    "disable-custom-all-reduce": st.sampled_from([True, False, None, "yes"]),
    "tp-size": st.one_of(st.integers(1, 32), st.sampled_from(["8", "x", "08", None])),
    "tensor-parallel-size": st.integers(1, 16),
    "nnodes": st.integers(1, 3),
    "dist-init-addr": st.sampled_from(["10.0.0.1:5000", None]),
    "revision": st.sampled_from(["0123456789abcdef0123456789abcdef01234567", None]),
    "port": st.integers(1024, 65535),
    "tp": st.integers(1, 16),
    "disable": st.just(True),
}

EXTRA_TOKENS = st.sampled_from([
    ["--tp", "16"], ["--tp-size=4"], ["--attention-backend", "fa3"], ["--attention-backed", "triton"],
    ["--moe-runner-backend=flashinfer_trtllm"], ["--disable-custom-all-reduce"], ["--enable-metrics"],
    ["--kv-cache-dtype", "fp8_e5m2"], ["stray"], ["--nnodes", "2"], ["--dist-init-addr", "h:1"],
    ["--lora-paths", "a", "b"], ["--port"], ["--disable-radix"], ["--disable"], ["--fp4-gemm-runner-backend", "auto"],
    ["--disable-custom-all-reduce=1"], ["--tensor-parallel-size", "x"], ["--mem-fraction-static", "0.9"],
])


@st.composite
def generated_case(draw):
    profile = patched(DEFAULT.data, {
        "hardware.gpus": draw(st.integers(1, 16)),
        "hardware.interconnect": draw(st.sampled_from(["pcie", "nvlink"])),
        "hardware.compute_capability": draw(st.sampled_from(["12.0", "10.0", "9.0"])),
        "model.kv_cache_scales_calibrated": draw(st.booleans()),
        "model.uses_mla": draw(st.booleans()),
        "model.revision": draw(st.sampled_from([None, "fedcba9876543210fedcba9876543210fedcba98"])),
        "model.id": draw(st.sampled_from(["nvidia/Qwen3.5-397B-A17B-NVFP4", "/srv/models/qwen"])),
        "runtime.flashinfer": draw(st.sampled_from(["0.6.3", "0.6.5", "0.6.10", "0.7.0"])),
    })
    if draw(st.booleans()):
        profile["flags"].pop(draw(st.sampled_from(sorted(profile["flags"]))))
    keys = draw(st.lists(st.sampled_from(sorted(FLAG_VALUES)), max_size=5, unique=True))
    overrides = {}
    for k in keys:
        spelled = draw(st.sampled_from([k, f"--{k}"]))
        overrides[spelled] = draw(FLAG_VALUES[k])
    extra = [t for group in draw(st.lists(EXTRA_TOKENS, max_size=4)) for t in group]
    env = draw(st.sampled_from([{}, {"NCCL_P2P_LEVEL": None}, {"HF_HUB_OFFLINE": "1"}]))
    rules = draw(st.sampled_from([
        RULES, FIX_KNOWN, patched(RULES, {"constants.flashinfer_fp4_cutlass_fix_version": "0.6.4"}),
    ]))
    return {"profile": profile, "overrides": overrides, "extraArgs": extra, "env": env, "rules": rules}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cases=st.lists(generated_case(), min_size=40, max_size=40))
def test_generated_profiles_agree(nix, tmp_path, cases):
    assert_same(nix, cases, tmp_path)
