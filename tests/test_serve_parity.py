"""lib/sglang-service.nix and blackwell_stack.serve render the same argv and environment: on every
profile, on generated profiles and runtimes (hypothesis), on every rule's cases and per stack. The
module also checks it on every configuration it builds (modules/sglang/check.nix). The rules are
Python's alone: every rule fires on one case and stays quiet on another, per SGLang version a rule
scoped to 0.5.9 stays quiet on 0.5.23 and the other way round, and a version a rule was not checked
for gives a warning.

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

from blackwell_stack.data import stack as stack_data
from blackwell_stack.data.profile import Profile, Runtime, available_profiles, load_profile, load_rules
from blackwell_stack.serve import flags
from blackwell_stack.serve.render import render
from blackwell_stack.serve.rules import evaluate

pytestmark = pytest.mark.nix

TABLES = {v: flags.load_table(v) for v in flags.available_versions()}
RULES = load_rules()
DEFAULT = load_profile()
CURRENT = load_profile("qwen3.5-397b-a17b-nvfp4-sm120-current")
STABLE = {"sglang": "0.5.9", "flashinfer": "0.6.5"}
NOW = {"sglang": "0.5.23", "flashinfer": "0.7.2"}

# A case's runtime is what the rules see; its table is the runtime's SGLang unless
# the case names another (a version without a table renders with one that has).
NIX_BATCH = """
let
  s = import ./lib/sglang-service.nix;
  cases = builtins.fromJSON (builtins.readFile {path});
in
map (c:
  let r = s.render {{ inherit (c) profile runtime overrides extraArgs env; table = s.flagTableFor c.table; }}; in
  {{ inherit (r) argv env; }})
  cases
"""


def python_result(case: dict) -> dict:
    profile = Profile(Path("generated.json"), case["profile"])
    runtime = Runtime(case["runtime"]["sglang"], case["runtime"].get("flashinfer"))
    table = TABLES[case["table"]]
    rendered = render(profile, table, case["rules"], case["overrides"], case["extraArgs"], case["env"], runtime=runtime)
    verdicts = evaluate(rendered, case["rules"], table.data)
    return {
        "argv": rendered.argv,
        "env": rendered.env,
        "verdicts": [
            {"id": v.id, "severity": v.severity, "fired": v.fired, "messages": v.messages, "applies": v.applies, "note": v.note}
            for v in verdicts
        ],
    }


def nix_results(nix, cases: list[dict], tmp_dir: Path) -> list[dict]:
    path = tmp_dir / "cases.json"
    path.write_text(json.dumps(cases))
    return nix.eval(NIX_BATCH.format(path=path))


def case(profile=None, overrides=None, extra_args=None, env=None, rules=None, runtime=None, table=None) -> dict:
    profile = profile or DEFAULT.data
    runtime = runtime or {"sglang": profile["runtime"]["sglang"], "flashinfer": profile["runtime"]["flashinfer"]}
    return {
        "profile": profile,
        "runtime": runtime,
        "table": table or runtime["sglang"],
        "overrides": overrides or {},
        "extraArgs": extra_args or [],
        "env": env or {},
        "rules": rules or RULES,
    }


def now(**kw) -> dict:
    """A case on the current stack's profile (sglang 0.5.23, flashinfer 0.7.2)."""
    return case(profile=kw.pop("profile", CURRENT.data), **kw)


def patched(base: dict, patch: dict) -> dict:
    out = copy.deepcopy(base)
    for dotted, value in patch.items():
        *parents, last = dotted.split(".")
        node = out
        for p in parents:
            node = node[p]
        node[last] = value
    return out


def rendered(result: dict) -> dict:
    return {"argv": result["argv"], "env": result["env"]}


def assert_same(nix, cases, tmp_path):
    got = nix_results(nix, cases, tmp_path)
    assert len(got) == len(cases)
    for c, n in zip(cases, got):
        assert rendered(python_result(c)) == n, json.dumps(c)[:2000]


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


def test_every_profile_renders_the_same_and_passes(nix, tmp_path):
    cases = [case(profile=load_profile(name).data) for name in available_profiles()]
    assert_same(nix, cases, tmp_path)
    for c in cases:
        result = python_result(c)
        assert [v["id"] for v in result["verdicts"] if v["fired"] and v["severity"] == "error"] == [], c["profile"]["name"]


def test_the_current_profile_renders_0_5_23_spellings(nix, tmp_path):
    argv = python_result(now())["argv"]
    # 0.5.23's primary spelling is --tp-size; the profile's --tensor-parallel-size is its alias.
    assert argv[argv.index("--tp-size") + 1] == "8" and "--tensor-parallel-size" not in argv
    # A BooleanOptionalAction flag set false renders its --no- spelling.
    c = now(overrides={"enable-tf32-matmul": False})
    assert_same(nix, [c], tmp_path)
    assert "--no-enable-tf32-matmul" in python_result(c)["argv"]


def test_extra_args_come_last_so_the_user_wins(nix, tmp_path):
    c = case(extra_args=["--attention-backend", "flashinfer"])
    assert_same(nix, [c], tmp_path)
    argv = python_result(c)["argv"]
    assert argv[-2:] == ["--attention-backend", "flashinfer"]
    assert argv.count("--attention-backend") == 2  # the profile's stays, argparse keeps the last


# --- every rule fires on one case and stays quiet on another, on both sides ------------------

FI_OLD = {"sglang": "0.5.9", "flashinfer": "0.6.6"}
FI_FIXED = {"sglang": "0.5.9", "flashinfer": "0.6.7"}

RULE_CASES = {
    "sglang-rejects-flag": (
        case(overrides={"fp4-gemm-runner-backend": "flashinfer_cudnn"}),
        case(overrides={"tp": 8}),
    ),
    "sm120-moe-flashinfer-trtllm": (
        now(overrides={"moe-runner-backend": "flashinfer_trtllm"}),
        case(profile=patched(DEFAULT.data, {"hardware.compute_capability": "10.0"}),
             overrides={"moe-runner-backend": "flashinfer_trtllm"}),
    ),
    "sm120-fp4-gemm-flashinfer-trtllm": (
        case(extra_args=["--fp4-gemm-backend=flashinfer_trtllm"]),
        now(extra_args=["--fp4-gemm-backend=flashinfer_cudnn"]),
    ),
    "sm120-moe-flashinfer-cutedsl": (
        now(extra_args=["--moe-runner-backend", "flashinfer_cutedsl"]),
        case(extra_args=["--moe-runner-backend", "flashinfer_cutlass"]),
    ),
    "sm120-fp4-gemm-cutlass-before-flashinfer-fix": (
        case(overrides={"fp4-gemm-backend": None}),  # 0.5.9's default is flashinfer_cutlass; flashinfer 0.6.5
        case(overrides={"fp4-gemm-backend": "flashinfer_cutlass"}, runtime=FI_FIXED),
    ),
    "sm120-moe-cutlass-before-flashinfer-gdc-fix": (
        case(),  # the seed: flashinfer_cutlass MoE on flashinfer 0.6.5
        now(),  # flashinfer 0.7.2
    ),
    "sm120-attention-backend-without-kernels": (
        now(overrides={"decode-attention-backend": "fa3"}),
        case(overrides={"attention-backend": "flashinfer"}),
    ),
    "sm120-trtllm-mha-refused-by-sglang": (
        case(overrides={"attention-backend": "trtllm_mha"}),
        now(overrides={"attention-backend": "trtllm_mha"}),  # 0.5.23 runs trtllm_mha on SM120
    ),
    "sm120-trtllm-mha-prefill-fp8-kv-cache": (
        now(overrides={"attention-backend": "trtllm_mha", "kv-cache-dtype": "fp8_e4m3"},
            profile=patched(CURRENT.data, {"model.kv_cache_scales_calibrated": True})),
        case(overrides={"attention-backend": "trtllm_mha", "kv-cache-dtype": "fp8_e4m3"},
             profile=patched(DEFAULT.data, {"model.kv_cache_scales_calibrated": True})),  # 0.5.9: not this rule
    ),
    "mla-attention-backend-on-non-mla-model": (
        now(overrides={"attention-backend": "cutedsl_mla"}),
        case(overrides={"attention-backend": "flashmla"}, profile=patched(DEFAULT.data, {"model.uses_mla": True})),
    ),
    "fp8-kv-cache-without-calibrated-scales": (
        now(overrides={"kv-cache-dtype": "fp8_e4m3"}),
        case(overrides={"kv-cache-dtype": "fp8_e4m3"},
             profile=patched(DEFAULT.data, {"model.kv_cache_scales_calibrated": True})),
    ),
    "kv-cache-dtype-auto": (
        now(overrides={"kv-cache-dtype": None}),
        case(),
    ),
    "custom-all-reduce-on-pcie": (
        case(overrides={"disable-custom-all-reduce": False}),
        now(overrides={"disable-custom-all-reduce": False},
            profile=patched(CURRENT.data, {"hardware.interconnect": "nvlink"})),
    ),
    "tp-not-positive": (
        now(extra_args=["--tp-size", "0"]),
        case(extra_args=["--tp", "1"]),
    ),
    "mem-fraction-static-out-of-range": (
        case(extra_args=["--mem-fraction-static", "1.5"]),
        now(extra_args=["--mem-fraction-static", "0.85"]),
    ),
    "context-length-not-positive": (
        now(overrides={"context-length": -1}),
        case(extra_args=["--context-length", "4096"]),
    ),
    "model-path-empty": (
        case(overrides={"model-path": ""}),
        now(),
    ),
    "port-out-of-range": (
        case(overrides={"port": 70000}),
        now(extra_args=["--nccl-port", "65535"]),
    ),
    "tp-exceeds-gpus": (
        case(extra_args=["--tp", "16"]),
        now(extra_args=["--tp", "16", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000"]),
    ),
    "tp-leaves-gpus-idle": (
        now(overrides={"tensor-parallel-size": 4}),
        case(overrides={"tp-size": "8"}),
    ),
    "multi-node-without-dist-init-addr": (
        case(overrides={"nnodes": 2, "tp-size": 16}),
        now(overrides={"nnodes": 2, "tp-size": 16, "nccl-init-addr": "10.0.0.1:5000"}),
    ),
    "model-revision-unpinned": (
        now(),
        case(profile=patched(DEFAULT.data, {"model.id": "/var/lib/models/qwen3.5"})),
    ),
    "model-revision-not-a-commit": (
        case(overrides={"revision": "main"}),
        now(overrides={"revision": "0123456789abcdef0123456789abcdef01234567"}),
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
            assert rendered(py) == n, (rid, want)
            fired = {v["id"]: v for v in py["verdicts"]}
            assert fired[rid]["fired"] is want, (rid, py["verdicts"])
            if want:
                assert fired[rid]["applies"] == "yes", (rid, fired[rid])


def _verdict(c, rid):
    return next(v for v in python_result(c)["verdicts"] if v["id"] == rid)


def test_a_rule_scoped_to_one_sglang_does_not_fire_on_the_other(nix, tmp_path):
    trtllm_0_5_9 = case(overrides={"attention-backend": "trtllm_mha", "kv-cache-dtype": "fp8_e4m3"},
                        profile=patched(DEFAULT.data, {"model.kv_cache_scales_calibrated": True}))
    trtllm_0_5_23 = now(overrides={"attention-backend": "trtllm_mha", "kv-cache-dtype": "fp8_e4m3"},
                        profile=patched(CURRENT.data, {"model.kv_cache_scales_calibrated": True}))
    assert_same(nix, [trtllm_0_5_9, trtllm_0_5_23], tmp_path)
    # 0.5.9 refuses trtllm_mha on SM120; 0.5.23 runs it, but not its prefill with an fp8_e4m3 KV cache.
    only_0_5_9, only_0_5_23 = "sm120-trtllm-mha-refused-by-sglang", "sm120-trtllm-mha-prefill-fp8-kv-cache"
    assert _verdict(trtllm_0_5_9, only_0_5_9)["fired"] and _verdict(trtllm_0_5_23, only_0_5_23)["fired"]
    for c, rid, version in ((trtllm_0_5_23, only_0_5_9, "0.5.23"), (trtllm_0_5_9, only_0_5_23, "0.5.9")):
        v = _verdict(c, rid)
        assert (v["fired"], v["applies"]) == (False, "no"), v
        assert v["note"].startswith(f"does not apply to sglang {version}"), v


def test_a_version_a_rule_was_not_checked_for_gives_a_warning(nix, tmp_path):
    # flashinfer 0.6.9 is in neither range of the CuTe DSL rule (checked for 0.6.5 and 0.7.2 only).
    unchecked = case(extra_args=["--moe-runner-backend", "flashinfer_cutedsl"], runtime={"sglang": "0.5.9", "flashinfer": "0.6.9"})
    # An SGLang without a table of its own, rendered with 0.5.23's: every version-scoped rule is unknown.
    unknown_sglang = now(overrides={"attention-backend": "fa3"}, runtime={"sglang": "0.5.15", "flashinfer": "0.7.2"}, table="0.5.23")
    # A local build is its public version (PEP 440 matching ignores the local label): 0.5.23+cu130 is checked.
    local_build = now(overrides={"attention-backend": "fa3"}, runtime={"sglang": "0.5.23+cu130", "flashinfer": "0.7.2"}, table="0.5.23")
    no_flashinfer = case(extra_args=["--moe-runner-backend", "flashinfer_cutedsl"], runtime={"sglang": "0.5.9", "flashinfer": None})
    assert_same(nix, [unchecked, unknown_sglang, local_build, no_flashinfer], tmp_path)

    v = _verdict(unchecked, "sm120-moe-flashinfer-cutedsl")
    assert (v["fired"], v["severity"], v["applies"]) == (True, "warning", "unknown")
    assert v["messages"][0].startswith("(truth unknown: not checked for flashinfer 0.6.9 (holds for 0.6.5, 0.7.2; does not hold for none)) ")
    assert _verdict(local_build, "sm120-attention-backend-without-kernels")["applies"] == "yes"
    for c, version in ((unknown_sglang, "0.5.15"),):
        v = _verdict(c, "sm120-attention-backend-without-kernels")
        assert (v["fired"], v["severity"], v["applies"]) == (True, "warning", "unknown"), v
        assert f"not checked for sglang {version}" in v["messages"][0]
        # A rule whose condition does not hold stays quiet, and says why not in its note.
        quiet = _verdict(c, "sm120-moe-flashinfer-trtllm")
        assert (quiet["fired"], quiet["applies"]) == (False, "unknown") and "not checked for sglang" in quiet["note"]
    v = _verdict(no_flashinfer, "sm120-moe-flashinfer-cutedsl")
    assert (v["fired"], v["severity"]) == (True, "warning") and "the flashinfer version is not known" in v["messages"][0]


def test_an_unknown_version_is_never_an_error_it_is_a_warning():
    c = now(overrides={"attention-backend": "fa3", "moe-runner-backend": "flashinfer_trtllm"},
            runtime={"sglang": "0.5.15", "flashinfer": "0.6.9"}, table="0.5.23")
    fired = [v for v in python_result(c)["verdicts"] if v["fired"]]
    assert {v["id"] for v in fired} >= {"sm120-attention-backend-without-kernels", "sm120-moe-flashinfer-trtllm"}
    assert all(v["severity"] == "warning" for v in fired if v["applies"] == "unknown")


def test_a_runtime_version_that_is_not_pep440_is_refused():
    with pytest.raises(Exception, match="PEP 440"):
        python_result(now(runtime={"sglang": "0.5.23", "flashinfer": "v0.7.2"}, table="0.5.23"))


def test_fired_messages_name_the_flag_and_the_fix():
    py = python_result(RULE_CASES["sm120-moe-flashinfer-trtllm"][0])
    (msg,) = next(v for v in py["verdicts"] if v["id"] == "sm120-moe-flashinfer-trtllm")["messages"]
    assert "--moe-runner-backend flashinfer_trtllm" in msg and "use flashinfer_cutlass" in msg
    py = python_result(RULE_CASES["sglang-rejects-flag"][0])
    (msg,) = next(v for v in py["verdicts"] if v["id"] == "sglang-rejects-flag")["messages"]
    assert "did you mean --fp4-gemm-backend?" in msg


# --- generated profiles -----------------------------------------------------------------------

def _choices(flag, version="0.5.9"):
    return TABLES[version].data["flags"][flag]["choices"]


FLAG_VALUES = {
    "moe-runner-backend": st.sampled_from(_choices("--moe-runner-backend") + ["bogus", None]),
    "fp4-gemm-backend": st.sampled_from(_choices("--fp4-gemm-backend", "0.5.23") + [None]),
    "fp4-gemm-runner-backend": st.sampled_from(["flashinfer_cudnn"]),
    "attention-backend": st.sampled_from(_choices("--attention-backend") + ["cutedsl_mla", None]),
    "prefill-attention-backend": st.sampled_from(["trtllm_mha", "triton", None]),
    "decode-attention-backend": st.sampled_from(["fa3", "triton", "trtllm_mha", None]),
    "kv-cache-dtype": st.sampled_from(_choices("--kv-cache-dtype") + [None, "fp8", "bf16"]),
    "disable-custom-all-reduce": st.sampled_from([True, False, None, "yes"]),
    "tp-size": st.one_of(st.integers(-1, 32), st.sampled_from(["8", "x", "08", None])),
    "tensor-parallel-size": st.integers(0, 16),
    "nnodes": st.integers(1, 3),
    "dist-init-addr": st.sampled_from(["10.0.0.1:5000", None]),
    "revision": st.sampled_from(["0123456789abcdef0123456789abcdef01234567", None]),
    "port": st.one_of(st.integers(1024, 65535), st.sampled_from([0, 65536, -1])),
    "nccl-port": st.sampled_from([29500, 0, 70000, None]),
    "tp": st.integers(1, 16),
    "disable": st.just(True),
    "enable-tf32-matmul": st.sampled_from([True, False]),
}

EXTRA_TOKENS = st.sampled_from([
    ["--tp", "16"], ["--tp-size=4"], ["--attention-backend", "fa3"], ["--attention-backed", "triton"],
    ["--moe-runner-backend=flashinfer_trtllm"], ["--disable-custom-all-reduce"], ["--enable-metrics"],
    ["--kv-cache-dtype", "fp8_e5m2"], ["stray"], ["--nnodes", "2"], ["--dist-init-addr", "h:1"],
    ["--lora-paths", "a", "b"], ["--port"], ["--disable-radix"], ["--disable"], ["--fp4-gemm-runner-backend", "auto"],
    ["--disable-custom-all-reduce=1"], ["--tensor-parallel-size", "x"], ["--mem-fraction-static", "0.9"],
    ["--no-enable-tf32-matmul"], ["--no-enable-tf"], ["--enable-tf32-matmul"], ["--nccl-init-addr", "h:2"],
    ["--port", "0"], ["--tensor-parallel-size", "-2"], ["--attention-backend", "trtllm_mha"],
])

# Runtimes a stack may hand over: the seed's and the current versions, versions no rule
# was checked for, pre-releases and local builds, and a flashinfer that is not known.
RUNTIMES = st.sampled_from([
    STABLE, NOW, {"sglang": "0.5.9", "flashinfer": "0.6.3"}, {"sglang": "0.5.9", "flashinfer": "0.6.6"},
    {"sglang": "0.5.9", "flashinfer": "0.6.7"}, {"sglang": "0.5.9", "flashinfer": "0.6.8rc1"},
    {"sglang": "0.5.23", "flashinfer": "0.7.2.post1"}, {"sglang": "0.5.23", "flashinfer": "0.7.2+cu130"},
    {"sglang": "0.5.23", "flashinfer": None}, {"sglang": "0.5.15", "flashinfer": "0.6.9"},
    {"sglang": "0.5.23rc0", "flashinfer": "0.7.2"}, {"sglang": "0.5.9.dev20260307+cu130", "flashinfer": "0.6.5"},
])


@st.composite
def generated_case(draw):
    base = draw(st.sampled_from([DEFAULT.data, CURRENT.data, load_profile("qwen3.5-397b-a17b-nvfp4-v2-sm120-current").data]))
    profile = patched(base, {
        "hardware.gpus": draw(st.integers(1, 16)),
        "hardware.interconnect": draw(st.sampled_from(["pcie", "nvlink"])),
        "hardware.compute_capability": draw(st.sampled_from(["12.0", "10.0", "9.0"])),
        "model.kv_cache_scales_calibrated": draw(st.booleans()),
        "model.uses_mla": draw(st.booleans()),
        "model.revision": draw(st.sampled_from([None, "fedcba9876543210fedcba9876543210fedcba98"])),
        "model.id": draw(st.sampled_from(["nvidia/Qwen3.5-397B-A17B-NVFP4", "/srv/models/qwen"])),
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
    runtime = draw(RUNTIMES)
    table = runtime["sglang"] if runtime["sglang"] in TABLES else draw(st.sampled_from(sorted(TABLES)))
    return {"profile": profile, "runtime": runtime, "table": table, "overrides": overrides, "extraArgs": extra,
            "env": env, "rules": RULES}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cases=st.lists(generated_case(), min_size=40, max_size=40))
def test_generated_profiles_agree(nix, tmp_path, cases):
    assert_same(nix, cases, tmp_path)


# --- per stack: the runtime comes from the lock, on both sides ---------------------------------

STACK_BATCH = """
let
  stacks = import ./lib/stacks.nix;
  s = import ./lib/sglang-service.nix;
  cases = builtins.fromJSON (builtins.readFile {path});
in
map (c:
  let
    locked = stacks.versions c.stack;
    r = s.render {{ profile = s.loadProfile c.profile; runtime = {{ inherit (locked) sglang flashinfer; }}; inherit (c) overrides; }};
  in
  {{ inherit (r) argv env; }})
  cases
"""
# Settings whose verdicts depend on the SGLang or flashinfer a stack locks.
STACK_SETTINGS = [
    {},
    {"fp4-gemm-backend": "flashinfer_cutlass"},
    {"attention-backend": "trtllm_mha"},
    {"moe-runner-backend": "flashinfer_cutedsl"},
    {"attention-backend": "fa3"},
]
LOCKED_STACKS = [n for n in stack_data.names() if stack_data.load(n).locked]


def _stack_python(c: dict) -> dict:
    """`serve check --stack STACK --profile PROFILE --set K=V`: the lock's runtime, the profile held to the stack."""
    from blackwell_stack.data import stack as stack_data
    from blackwell_stack.serve.service import configure

    service = configure(c["profile"], stack=stack_data.load(c["stack"]), settings=[f"{k}={v}" for k, v in c["overrides"].items()])
    return {
        "argv": service.rendered.argv,
        "env": service.rendered.env,
        # The secret-flag verdict is serve's own (serve/secrets.py); the module asserts it apart from the rules.
        "verdicts": [{"id": v.id, "severity": v.severity, "fired": v.fired, "messages": v.messages, "applies": v.applies,
                      "note": v.note} for v in service.verdicts if v.id != "secret-flag-on-command-line"],
    }


@pytest.mark.parametrize("stack", LOCKED_STACKS)
def test_nix_and_python_render_each_stack_alike(nix, tmp_path, stack):
    """lib/stacks.nix reads the lock's versions, lib/sglang-service.nix renders with them; the
    CLI's `--stack` does the same from the same lock: the same argv; and its verdicts."""
    cases = [{"stack": stack, "profile": profile, "overrides": overrides}
             for profile in stack_data.load(stack).profiles for overrides in STACK_SETTINGS]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    got = nix.eval(STACK_BATCH.format(path=path))
    assert len(got) == len(cases)
    python = [_stack_python(c) for c in cases]
    for c, py, n in zip(cases, python, got):
        assert rendered(py) == n, c
    fired = {(c["profile"], json.dumps(c["overrides"])): {v["id"] for v in py["verdicts"] if v["fired"] and v["severity"] == "error"}
             for c, py in zip(cases, python)}
    first = stack_data.load(stack).profiles[0]
    assert fired[(first, "{}")] == set()
    cutlass = fired[(first, json.dumps({"fp4-gemm-backend": "flashinfer_cutlass"}))]
    trtllm = fired[(first, json.dumps({"attention-backend": "trtllm_mha"}))]
    if stack == "stable":
        # flashinfer 0.6.5 lacks the PDL fix (flashinfer PR #2780), and SGLang 0.5.9 refuses trtllm_mha on SM120.
        assert "sm120-fp4-gemm-cutlass-before-flashinfer-fix" in cutlass
        assert "sm120-trtllm-mha-refused-by-sglang" in trtllm
    else:
        # flashinfer 0.7.2 has it; SGLang 0.5.23 runs trtllm_mha on SM120 (with a bf16 KV cache here).
        assert cutlass == set() and trtllm == set()
    for overrides in ({"moe-runner-backend": "flashinfer_cutedsl"}, {"attention-backend": "fa3"}):
        assert fired[(first, json.dumps(overrides))], (stack, overrides)
