"""services.sglang evaluated as NixOS evaluates it, with the real nixpkgs lib.

modules/sglang.nix goes through nixpkgs.lib's evalModules at the locked
revision, with stand-in declarations of the NixOS options it sets
(tests/nixos/options.nix, typed as NixOS types them) and of pkgs only what the
module may read. Each test is a host configuration and what the host gets:
the unit's environment and commands, kernel modules, failure policy, secrets,
state ownership, sandboxing, the default model, and no nixpkgs.* at all.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from support.module_eval import (
    CC_PATH,
    CLI_PATH,
    CUDA_PATH,
    ENV_PATH,
    FLAKE_ENV_PREFIX,
    NVIDIA_BIN_PATH,
    PROFILE,
    REPO,
    evaluate,
    evaluate_one,
    exec_argv,
    host,
    nixpkgs_lib,  # noqa: F401  (fixture)
    run_check,
    stack_package,
)

pytestmark = pytest.mark.nix

STATE_VARIABLES = ("HOME", "HF_HOME", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE",
                   "XDG_CACHE_HOME", "CUDA_CACHE_PATH")


@pytest.fixture(scope="module")
def default_host(nix, nixpkgs_lib, tmp_path_factory):
    return evaluate_one(nix, nixpkgs_lib, host(), tmp_path_factory.mktemp("default"))


def failed(result: dict, fragment: str) -> list[str]:
    return [m for m in result["failedAssertions"] if fragment in m]


# --- the host's nixpkgs is left alone ----------------------------------------------------------

def test_the_default_host_builds_a_unit(default_host):
    assert default_host["failedAssertions"] == []
    assert default_host["unit"] is not None


def test_the_module_sets_no_nixpkgs_option(default_host):
    assert default_host["nixpkgsDefinitions"] == []


def test_without_a_package_it_names_the_flake_module_instead_of_reaching_into_pkgs(nix, nixpkgs_lib, tmp_path):
    # The stand-in pkgs has addDriverRunpath.driverLink only: a default taken
    # from pkgs' Python set (ps.sglang) would not even evaluate here.
    result = evaluate_one(nix, nixpkgs_lib, host(package="null"), tmp_path)
    (message,) = failed(result, "services.sglang.package is not set")
    assert "nixosModules.sglang" in message and "sglang-env" in message
    assert result["unit"] is None


def test_a_package_without_passthru_needs_cuda_home_and_cc(nix, nixpkgs_lib, tmp_path):
    bare = stack_package(with_passthru=False)
    results = evaluate(nix, nixpkgs_lib, {
        "bare": host(package=bare),
        "given": host(f'services.sglang.runtime = {{ cudaHome = standIn.package "cuda" "{CUDA_PATH}" {{ }}; cc = standIn.package "cc" "{CC_PATH}" {{ }}; }};',
                      package=bare),
    }, tmp_path)
    (message,) = failed(results["bare"], "runtime.cudaHome and runtime.cc")
    assert "passthru.blackwellStack" in message
    given = results["given"]
    assert given["failedAssertions"] == []
    assert given["final"]["finalEnvironment"]["CUDA_HOME"] == CUDA_PATH
    assert any("passthru.blackwellStack.versions" in w for w in given["warnings"])


def test_a_stack_of_other_versions_than_the_profile_is_refused(nix, nixpkgs_lib, tmp_path):
    other = stack_package(versions={"sglang": "0.5.23", "flashinfer": PROFILE["runtime"]["flashinfer"], "torch": "2.14.1"})
    result = evaluate_one(nix, nixpkgs_lib, host(package=other), tmp_path)
    (message,) = failed(result, "has sglang 0.5.23")
    assert f"sglang {PROFILE['runtime']['sglang']}" in message


# --- the stack: the flake's module picks its environment and its first profile ----------------

V2_PROFILE = "qwen3.5-397b-a17b-nvfp4-v2-sm120-current"
CURRENT_PROFILE = "qwen3.5-397b-a17b-nvfp4-sm120-current"


def _profile_setting(name: str) -> str:
    return f"services.sglang.profile = lib.importJSON {REPO}/modules/profiles/{name}.json;"


def _python_render(profile: str, stack: str) -> dict:
    """What `blackwell-stack serve render --stack STACK --profile PROFILE --json` prints."""
    import contextlib
    import io

    from blackwell_stack.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["serve", "render", "--stack", stack, "--profile", profile, "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def flake_hosts(nix, nixpkgs_lib, tmp_path_factory):
    return evaluate(nix, nixpkgs_lib, {
        "default": host(flake=True),
        "current": host('services.sglang.stack = "current";', flake=True),
        "current-v2": host('services.sglang.stack = "current";', _profile_setting(V2_PROFILE),
                           'services.sglang.quantization = "modelopt_mixed";', flake=True),
        "stable-with-v2": host(_profile_setting(V2_PROFILE), flake=True),
        "current-with-seed": host('services.sglang.stack = "current";',
                                  _profile_setting("qwen3.5-397b-a17b-nvfp4-sm120"), flake=True),
        "current-with-stable-env": host('services.sglang.stack = "current";', f"services.sglang.package = {stack_package()};",
                                        flake=True),
    }, tmp_path_factory.mktemp("flake"), flake=True)


def test_the_flake_module_runs_the_default_stack_unless_told(flake_hosts):
    from blackwell_stack.data import stack as stack_data

    default = flake_hosts["default"]
    assert default["failedAssertions"] == []
    # No nixpkgs.overlays (overlays.cuda-13-0 is opt in) and no nixpkgs.config.
    assert default["nixpkgsDefinitions"] == []
    assert default["final"]["stack"] == stack_data.default_name() == "stable"
    assert default["final"]["profile"] == stack_data.load("stable").profiles[0] == PROFILE["name"]
    # The flake's sglang-env (lib/stacks.nix envName), and its own CLI for the smoke test.
    assert default["unit"]["path"][0] == f"{FLAKE_ENV_PREFIX}sglang-env"
    assert default["final"]["finalArgs"] == _python_render(PROFILE["name"], "stable")["argv"]


def test_the_current_stack_takes_its_environment_and_first_profile(flake_hosts):
    from blackwell_stack.data import stack as stack_data

    current = flake_hosts["current"]
    assert current["failedAssertions"] == []
    assert current["final"]["profile"] == stack_data.load("current").profiles[0] == CURRENT_PROFILE
    assert current["unit"]["path"] == [f"{FLAKE_ENV_PREFIX}sglang-env-current", CUDA_PATH, CC_PATH, NVIDIA_BIN_PATH]
    args = current["final"]["finalArgs"]
    # SGLang 0.5.23's table: --tp-size is the primary spelling there (0.5.9: --tensor-parallel-size).
    assert args[args.index("--tp-size") + 1] == "8" and "--tensor-parallel-size" not in args
    assert args == _python_render(CURRENT_PROFILE, "current")["argv"]
    # The current profile drops SGLANG_DISABLE_CUDNN_CHECK (0.5.23 no longer reads it).
    assert "SGLANG_DISABLE_CUDNN_CHECK" not in current["final"]["finalEnvironment"]


def test_the_v2_profile_on_the_current_stack_takes_modelopt_mixed(flake_hosts):
    """The option's choices are the profile's SGLang's: modelopt_mixed exists in 0.5.23 only."""
    v2 = flake_hosts["current-v2"]
    assert v2["failedAssertions"] == []
    args = v2["final"]["finalArgs"]
    assert args[args.index("--quantization") + 1] == "modelopt_mixed"
    assert args[:2] == ["--model-path", "nvidia/Qwen3.5-397B-A17B-NVFP4-V2"]
    assert args == _python_render(V2_PROFILE, "current")["argv"]


def test_modelopt_mixed_is_not_a_choice_of_the_seed_stacks_sglang(nix, nixpkgs_lib, tmp_path):
    with pytest.raises(AssertionError) as info:
        evaluate_one(nix, nixpkgs_lib, host('services.sglang.quantization = "modelopt_mixed";', flake=True), tmp_path,
                     flake=True)
    assert "services.sglang.quantization" in str(info.value) and "modelopt_fp4" in str(info.value)


def test_a_profile_of_another_stack_is_refused_with_the_fix(flake_hosts):
    (message,) = failed(flake_hosts["stable-with-v2"], "is not made for services.sglang.stack")
    assert V2_PROFILE in message and 'services.sglang.stack = "stable"' in message
    assert 'Set services.sglang.stack = "current"' in message
    assert flake_hosts["stable-with-v2"]["unit"] is None
    (message,) = failed(flake_hosts["current-with-seed"], "is not made for services.sglang.stack")
    assert 'Set services.sglang.stack = "stable"' in message
    assert f"a profile of the current stack: {CURRENT_PROFILE}, {V2_PROFILE}" in message


def test_an_environment_of_another_stack_is_refused_with_the_fix(flake_hosts):
    """A package set by hand (here the stable stand-in) must be the chosen stack's environment."""
    result = flake_hosts["current-with-stable-env"]
    (message,) = failed(result, "is the environment of the stable stack")
    assert 'services.sglang.stack = "current"' in message and 'set services.sglang.stack = "stable"' in message
    assert result["unit"] is None


def test_the_stack_is_one_with_a_lock(nix, nixpkgs_lib, tmp_path):
    from blackwell_stack.data import stack as stack_data

    with pytest.raises(AssertionError) as info:
        evaluate_one(nix, nixpkgs_lib, host('services.sglang.stack = "nightly";', flake=True), tmp_path, flake=True)
    assert "services.sglang.stack" in str(info.value)
    locked = [n for n in stack_data.names() if stack_data.load(n).locked]
    assert all(f'"{n}"' in str(info.value) for n in locked)


def test_a_profile_without_a_stacks_list_is_held_to_the_stacks_versions(nix, nixpkgs_lib, tmp_path):
    unlisted = f"services.sglang.profile = builtins.removeAttrs (lib.importJSON {REPO}/modules/profiles/{V2_PROFILE}.json) [ \"stacks\" ];"
    results = evaluate(nix, nixpkgs_lib, {
        "current": host('services.sglang.stack = "current";', unlisted, flake=True),
        "stable": host(unlisted, flake=True),
    }, tmp_path, flake=True)
    assert results["current"]["failedAssertions"] == []
    (message,) = failed(results["stable"], "is not made for services.sglang.stack")
    assert "it is for sglang 0.5.23, flashinfer 0.7.2" in message and 'Set services.sglang.stack = "current"' in message


# --- what the unit needs at run time -----------------------------------------------------------

def test_environment_for_triton_flashinfer_and_the_caches(default_host):
    env = default_host["final"]["finalEnvironment"]
    unit = default_host["unit"]
    assert unit["environment"] == env
    # NixOS has no /sbin/ldconfig (NixOS/nixpkgs#426296): triton is told where libcuda.so.1 is.
    assert env["TRITON_LIBCUDA_PATH"] == "/run/opengl-driver/lib"
    assert env["CC"] == f"{CC_PATH}/bin/cc" and env["CXX"] == f"{CC_PATH}/bin/c++"
    assert env["CUDA_HOME"] == CUDA_PATH
    for name in STATE_VARIABLES:
        assert env[name].startswith("/var/lib/sglang"), name
    # ninja (flashinfer's JIT) comes from the env's bin/, nvcc from the CUDA tree's, the compiler from cc's,
    # nvidia-smi (which SGLang 0.5.9 runs at start) from the driver's bin output.
    assert unit["path"] == [ENV_PATH, CUDA_PATH, CC_PATH, NVIDIA_BIN_PATH]
    # The profile's variables are there, each with its reason in the profile.
    for name, spec in PROFILE["env"].items():
        assert env[name] == spec["value"]


def test_a_custom_state_dir_moves_every_cache(nix, nixpkgs_lib, tmp_path):
    result = evaluate_one(nix, nixpkgs_lib, host('services.sglang.stateDir = "/var/lib/models/sglang";'), tmp_path)
    env = result["final"]["finalEnvironment"]
    for name in STATE_VARIABLES:
        assert env[name].startswith("/var/lib/models/sglang"), name
    assert result["unit"]["serviceConfig"]["StateDirectory"] == "models/sglang"


def test_user_environment_wins_and_null_removes(nix, nixpkgs_lib, tmp_path):
    text = host('services.sglang.environment = { HF_HOME = "/srv/hf"; CUDA_CACHE_PATH = null; NCCL_P2P_LEVEL = null; };')
    env = evaluate_one(nix, nixpkgs_lib, text, tmp_path)["final"]["finalEnvironment"]
    assert env["HF_HOME"] == "/srv/hf"
    assert "CUDA_CACHE_PATH" not in env and "NCCL_P2P_LEVEL" not in env


# --- kernel modules ----------------------------------------------------------------------------

def test_nvidia_uvm_is_loaded_at_boot(default_host):
    assert default_host["kernelModules"] == ["nvidia", "nvidia_uvm"]


def test_the_driver_is_required_with_the_open_modules(nix, nixpkgs_lib, tmp_path):
    results = evaluate(nix, nixpkgs_lib, {
        "none": host(nvidia=False),
        "closed": host("hardware.nvidia.open = false;"),
        "x11": host('hardware.nvidia.datacenter.enable = false; services.xserver.videoDrivers = [ "nvidia" ];'),
        "stand-in": host("services.sglang.requireNvidiaDriver = false;", nvidia=False),
        "no-graphics": host("hardware.graphics.enable = false;"),
    }, tmp_path)
    # The driver link /run/opengl-driver, where the environment finds libcuda.so.1, exists only with it.
    (message,) = failed(results["no-graphics"], "driver link /run/opengl-driver")
    assert "hardware.graphics.enable = true" in message
    (message,) = failed(results["none"], "needs the NVIDIA driver")
    assert "hardware.nvidia.datacenter.enable" in message
    (message,) = failed(results["closed"], "open kernel modules")
    assert "hardware.nvidia.open = true" in message
    assert results["x11"]["failedAssertions"] == []
    assert results["stand-in"]["failedAssertions"] == [] and results["stand-in"]["kernelModules"] == []
    assert results["stand-in"]["unit"]["path"] == [ENV_PATH, CUDA_PATH, CC_PATH]  # no driver, no nvidia-smi


# --- the flake's GPU checks on this host ------------------------------------------------------------

def test_gpu_checks_turn_on_nix_required_mounts_with_the_nvidia_preset(default_host, nix, nixpkgs_lib, tmp_path):
    """services.sglang.gpuChecks.enable gives the host's Nix the "cuda" feature that `nix build .#gpuChecks.*`
    requires, through nixpkgs' nix-required-mounts and its nvidia-gpu preset; it is off by default, works with the
    service off (a build host), and refuses a host without the NVIDIA driver, which the checks run on."""
    assert default_host["requiredMounts"] == {"enable": False, "nvidiaGpu": False}
    results = evaluate(nix, nixpkgs_lib, {
        "on": host("services.sglang.gpuChecks.enable = true;"),
        "build-host": host("services.sglang.gpuChecks.enable = true;", "services.sglang.enable = lib.mkForce false;"),
        "no-driver": host("services.sglang.gpuChecks.enable = true;", "services.sglang.requireNvidiaDriver = false;",
                          nvidia=False),
    }, tmp_path)
    assert results["on"]["failedAssertions"] == []
    assert results["on"]["requiredMounts"] == results["build-host"]["requiredMounts"] == {"enable": True,
                                                                                          "nvidiaGpu": True}
    (message,) = failed(results["no-driver"], "services.sglang.gpuChecks.enable needs the NVIDIA driver")
    assert "hardware.nvidia.datacenter.enable = true" in message


# --- failure policy ----------------------------------------------------------------------------

def test_gates_stop_the_unit_and_only_crashes_restart(default_host):
    service = default_host["unit"]["serviceConfig"]
    assert service["Type"] == "exec"
    # A failed ExecStartPost ends in result exit-code, which on-abnormal does not restart.
    assert service["Restart"] == "on-abnormal"
    (readiness,) = service["ExecStartPost"]
    argv = exec_argv(readiness)
    assert argv[0] == f"{ENV_PATH}/bin/python3" and argv[1].endswith("-sglang-readiness.py")
    assert argv[2:] == ["--url", "http://127.0.0.1:30000/health", "--timeout", "7200", "--interval", "5"]


def test_the_start_limit_can_trigger(nix, nixpkgs_lib, tmp_path):
    results = evaluate(nix, nixpkgs_lib, {
        "plain": host(),
        "smoke": host(f'services.sglang.smokeTest = {{ enable = true; package = standIn.package "cli" "{CC_PATH}" {{ }}; timeout = 100; }};',
                      "services.sglang.restart = { burst = 2; delaySec = 10; };"),
    }, tmp_path)
    for name, result in results.items():
        service, unit = result["unit"]["serviceConfig"], result["unit"]["unitConfig"]
        readiness = int(exec_argv(service["ExecStartPost"][0])[5])
        # Every failed start ends within TimeoutStartSec (after the gates' own limits) plus
        # RestartSec, so `burst` failed starts always fall inside the interval.
        assert service["TimeoutStartSec"] > readiness, name
        assert unit["StartLimitIntervalSec"] >= unit["StartLimitBurst"] * (service["TimeoutStartSec"] + service["RestartSec"]), name
    smoke = results["smoke"]["unit"]
    assert smoke["unitConfig"]["StartLimitBurst"] == 2 and smoke["serviceConfig"]["RestartSec"] == 10
    # 9 smoke requests of at most 100 s each come on top of the readiness timeout.
    assert smoke["serviceConfig"]["TimeoutStartSec"] >= 7200 + 9 * 100


def test_smoke_budget_matches_the_smoke_command():
    from blackwell_stack.verify.smoke import PROMPTS

    module = (REPO / "modules" / "sglang-smoke.nix").read_text()
    assert f"requests = {len(PROMPTS)} * 2 + 1;" in module


def test_the_old_start_timeout_option_still_works(nix, nixpkgs_lib, tmp_path):
    result = evaluate_one(nix, nixpkgs_lib, host("services.sglang.startTimeoutSec = 600;"), tmp_path)
    assert exec_argv(result["unit"]["serviceConfig"]["ExecStartPost"][0])[5] == "600"
    assert any("startTimeoutSec" in w and "readiness.timeoutSec" in w for w in result["warnings"])


def test_the_smoke_test_runs_after_the_readiness_gate_with_the_key_file(nix, nixpkgs_lib, tmp_path):
    text = host(f'services.sglang.smokeTest = {{ enable = true; package = standIn.package "cli" "{CC_PATH}" {{ }}; }};',
                'services.sglang.apiKeyFile = "/run/keys/sglang";')
    service = evaluate_one(nix, nixpkgs_lib, text, tmp_path)["unit"]["serviceConfig"]
    readiness, smoke = service["ExecStartPost"]
    assert readiness.endswith('"--interval" "5"')
    assert exec_argv(smoke, credentials="/run/credentials/sglang.service") == [
        f"{CC_PATH}/bin/blackwell-stack", "smoke", "http://127.0.0.1:30000", "--max-tokens", "128", "--timeout", "300",
        "--api-key-file", "/run/credentials/sglang.service/api-key",
    ]
    assert service["LoadCredential"] == ["api-key:/run/keys/sglang"]


def test_the_smoke_test_needs_its_package(nix, nixpkgs_lib, tmp_path):
    result = evaluate_one(nix, nixpkgs_lib, host("services.sglang.smokeTest.enable = true;"), tmp_path)
    (message,) = failed(result, "smokeTest.package is not set")
    assert "nixosModules.sglang" in message


# --- secrets -----------------------------------------------------------------------------------

KEY_SPELLINGS = [
    ["--api-key", "sk-1"], ["--api-key=sk-1"], ["--api-k", "sk-1"], ["--api", "sk-1"], ["--api=sk-1"],
    ["--enable-metrics", "--api-ke=sk-1"], ["--admin-api-key", "sk-1"], ["--admin", "sk-1"], ["--adm=sk-1"],
    ["--a", "sk-1"],  # ambiguous: argparse refuses it, but the value would already be in the unit
]


def test_a_key_on_the_command_line_is_refused_in_every_spelling(nix, nixpkgs_lib, tmp_path):
    hosts = {str(i): host(f"services.sglang.extraArgs = {json.dumps(args).replace(',', ' ')};") for i, args in enumerate(KEY_SPELLINGS)}
    hosts["profile"] = host('services.sglang.profile = lib.recursiveUpdate (lib.importJSON '
                            f'{REPO}/modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json) '
                            '{ flags."--api-k".value = "sk-1"; };')
    hosts["other"] = host('services.sglang.extraArgs = [ "--enable-metrics" "--served-model-name" "api" ];')
    results = evaluate(nix, nixpkgs_lib, hosts, tmp_path)
    for name, result in results.items():
        refused = failed(result, "would put the key in the Nix store")
        if name == "other":
            assert refused == [] and result["unit"] is not None
        else:
            assert len(refused) == 1, (name, result["failedAssertions"])
            assert "apiKeyFile" in refused[0] and result["unit"] is None


def test_the_smoke_test_refuses_a_key_in_its_arguments(nix, nixpkgs_lib, tmp_path):
    smoke = f'services.sglang.smokeTest = {{ enable = true; package = standIn.package "cli" "{CC_PATH}" {{ }}; }};'
    results = evaluate(nix, nixpkgs_lib, {
        "key": host(smoke, 'services.sglang.smokeTest.extraArgs = [ "--api-key" "sk-1" ];'),
        "abbreviated": host(smoke, 'services.sglang.smokeTest.extraArgs = [ "--api=sk-1" ];'),
        "file": host(smoke, 'services.sglang.smokeTest.extraArgs = [ "--api-key-file" "/run/keys/k" ];'),
    }, tmp_path)
    assert len(failed(results["key"], "smokeTest.extraArgs")) == 1
    assert len(failed(results["abbreviated"], "smokeTest.extraArgs")) == 1
    assert results["file"]["failedAssertions"] == []


def test_the_smoke_guard_covers_what_the_smoke_parser_reads_as_a_key(nix, nixpkgs_lib, tmp_path):
    """Every spelling that blackwell-stack's own parser reads as `smoke --api-key` is refused."""
    import argparse
    import contextlib
    import io

    from blackwell_stack.cli import build_parser

    spellings = [["--api-key", "k"], ["--api-key=k"], ["--api-ke", "k"], ["--api", "k"], ["--a=k"],
                 ["--api-key-file", "/run/keys/k"], ["--json"], ["--model", "m"]]
    parser = build_parser()
    smoke = f'services.sglang.smokeTest = {{ enable = true; package = standIn.package "cli" "{CC_PATH}" {{ }}; }};'
    hosts = {str(i): host(smoke, f"services.sglang.smokeTest.extraArgs = {json.dumps(s).replace(',', ' ')};")
             for i, s in enumerate(spellings)}
    results = evaluate(nix, nixpkgs_lib, hosts, tmp_path)
    keyed = []
    for i, spelled in enumerate(spellings):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                ns = parser.parse_args(["smoke", "http://127.0.0.1:30000", *spelled])
            sets_key = ns.api_key is not None
        except (SystemExit, argparse.ArgumentError):
            sets_key = False  # e.g. --api: ambiguous with --api-key-file
        refused = bool(failed(results[str(i)], "smokeTest.extraArgs"))
        if sets_key:
            keyed.append(spelled)
            assert refused, spelled
    assert keyed == [["--api-key", "k"], ["--api-key=k"]]
    assert not failed(results["5"], "smokeTest.extraArgs")  # --api-key-file names a file
    assert failed(results["2"], "smokeTest.extraArgs")  # --api-ke: refused too, though argparse finds it ambiguous


def test_no_option_example_shows_a_key(nix, nixpkgs_lib):
    examples = nix.eval(
        f"let lib = import {nixpkgs_lib}; "
        "  e = lib.evalModules { modules = [ ./tests/nixos/options.nix ./modules/sglang.nix "
        "    { _module.args = { pkgs = { }; utils = { }; }; } ]; }; "
        "in map (o: builtins.toJSON (o.example or null)) (lib.collect lib.isOption e.options.services.sglang)"
    )
    assert len(examples) > 30
    for example in examples:
        assert not re.search(r"--(admin-)?api-key\b(?!-file)", example), example


def test_keys_are_handed_over_as_credentials(nix, nixpkgs_lib, tmp_path):
    text = host('services.sglang.apiKeyFile = "/run/keys/api"; services.sglang.adminApiKeyFile = "/run/keys/admin";')
    unit = evaluate_one(nix, nixpkgs_lib, text, tmp_path)["unit"]
    assert unit["serviceConfig"]["LoadCredential"] == ["api-key:/run/keys/api", "admin-api-key:/run/keys/admin"]
    assert "/run/keys" not in unit["serviceConfig"]["ExecStart"]


# --- state, users, sandbox ---------------------------------------------------------------------

def test_the_default_state_dir_belongs_to_the_dynamic_user(default_host):
    service = default_host["unit"]["serviceConfig"]
    assert service["DynamicUser"] is True and "User" not in service
    assert service["StateDirectory"] == "sglang" and service["StateDirectoryMode"] == "0700"
    assert service["WorkingDirectory"] == "/var/lib/sglang"
    assert default_host["users"] == {} and default_host["tmpfiles"] == []


def test_a_state_dir_outside_var_lib_needs_a_user_who_owns_it(nix, nixpkgs_lib, tmp_path):
    results = evaluate(nix, nixpkgs_lib, {
        "dynamic": host('services.sglang.stateDir = "/srv/sglang";'),
        "static": host('services.sglang.stateDir = "/srv/sglang";', 'services.sglang.user = "sglang";'),
        "static-var-lib": host('services.sglang.user = "llm"; services.sglang.group = "gpu";'),
        "srv": host('services.sglang.stateDir = "/srv";', 'services.sglang.user = "sglang";'),
        "var-lib": host('services.sglang.stateDir = "/var/lib";', 'services.sglang.user = "sglang";'),
        "home": host('services.sglang.stateDir = "/home/alice/sglang";', 'services.sglang.user = "sglang";'),
    }, tmp_path)
    (message,) = failed(results["dynamic"], "outside /var/lib")
    assert "services.sglang.user" in message
    static = results["static"]
    assert static["failedAssertions"] == []
    service = static["unit"]["serviceConfig"]
    assert service["DynamicUser"] is False and service["User"] == "sglang" and service["Group"] == "sglang"
    assert "StateDirectory" not in service and service["ReadWritePaths"] == ["/srv/sglang"]
    assert static["tmpfiles"] == ["d /srv/sglang 0700 sglang sglang - -"]
    assert static["users"] == {"sglang": {"isSystemUser": True, "group": "sglang", "home": "/srv/sglang"}}
    assert static["groups"] == ["sglang"]
    for name in ("srv", "var-lib", "home"):
        assert failed(results[name], "must be a directory of its own"), name
    other = results["static-var-lib"]
    service = other["unit"]["serviceConfig"]
    assert (service["User"], service["Group"], service["StateDirectory"]) == ("llm", "gpu", "sglang")
    assert other["groups"] == ["gpu"] and other["tmpfiles"] == []


def test_private_mounts_and_the_rest_of_the_sandbox(default_host):
    service = default_host["unit"]["serviceConfig"]
    assert service["PrivateMounts"] is True
    for key in ("NoNewPrivileges", "ProtectKernelModules", "RestrictSUIDSGID", "PrivateUsers", "PrivateTmp"):
        assert service[key] is True, key
    assert service["ProtectSystem"] == "strict" and service["DevicePolicy"] == "closed"


def test_loopback_only_when_nothing_needs_the_network(nix, nixpkgs_lib, tmp_path):
    results = evaluate(nix, nixpkgs_lib, {
        "hub": host(),
        "local": host('services.sglang.model.path = "/srv/models/qwen";'),
        "offline": host('services.sglang.environment.HF_HUB_OFFLINE = "1";'),
        "public": host('services.sglang.model.path = "/srv/models/qwen"; services.sglang.host = "0.0.0.0";'),
        "forced-public": host('services.sglang.host = "0.0.0.0"; services.sglang.loopbackOnly = true;'),
        "home": host('services.sglang.model.path = "/home/alice/qwen";'),
    }, tmp_path)
    assert "IPAddressDeny" not in results["hub"]["unit"]["serviceConfig"]  # the first start downloads
    for name in ("local", "offline"):
        service = results[name]["unit"]["serviceConfig"]
        assert (service["IPAddressDeny"], service["IPAddressAllow"]) == ("any", "localhost"), name
        # NCCL's bootstrap and Gloo would pick the host's other interface, which the filter denies.
        env = results[name]["unit"]["environment"]
        assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == ("lo", "lo"), name
    assert "IPAddressDeny" not in results["public"]["unit"]["serviceConfig"]
    for name in ("hub", "public"):
        assert not {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"} & set(results[name]["unit"]["environment"]), name
    assert failed(results["forced-public"], "loopbackOnly needs a loopback host")
    assert failed(results["home"], "hidden from the service by ProtectHome")


def test_the_firewall_stays_closed_unless_asked(nix, nixpkgs_lib, tmp_path, default_host):
    assert default_host["allowedTCPPorts"] == []
    result = evaluate_one(nix, nixpkgs_lib, host("services.sglang.openFirewall = true;"), tmp_path)
    assert result["allowedTCPPorts"] == [30000]


# --- the model ---------------------------------------------------------------------------------

def test_the_default_model_is_nvidias_checkpoint(default_host, tmp_path):
    args = default_host["final"]["finalArgs"]
    assert args[:2] == ["--model-path", "nvidia/Qwen3.5-397B-A17B-NVFP4"]
    assert "--revision" not in args
    checked = run_check(default_host, tmp_path)
    (warning,) = [w for w in checked.stderr.splitlines() if "model-revision-unpinned" in w]
    assert warning.startswith("warning: services.sglang.model.revision:") and "NVFP4" in warning


# --- the build-time check ----------------------------------------------------------------------

def test_the_check_is_built_with_the_system_and_the_default_host_passes_it(default_host, tmp_path):
    (check,) = default_host["systemChecks"]
    assert check.endswith("-sglang-config-checked")
    assert default_host["checked"]["drvAttrs"]["nativeBuildInputs"] == [CLI_PATH]
    checked = run_check(default_host, tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "0 error(s)" in checked.stdout


def test_a_change_to_the_cli_alone_leaves_the_unit_as_it_was(nix, nixpkgs_lib, tmp_path):
    """The check's path changes with the CLI package (its sources, README, data); a restart trigger on it would
    restart SGLang, and reload its weights, on every such change. The unit stays the same; the check changes and
    is still one of the system's checks, which NixOS builds with the system."""
    other_cli = "/nix/store/0000000000000000000000000000000f-blackwell-stack"
    results = evaluate(nix, nixpkgs_lib, {
        "before": host(),
        "after": host(f'services.sglang.checkPackage = standIn.package "blackwell-stack" "{other_cli}" {{ }};'),
        "another-port": host("services.sglang.port = 30001;"),
    }, tmp_path)
    before, after = results["before"], results["after"]
    assert after["unit"] == before["unit"]
    assert after["checked"]["drvAttrs"]["nativeBuildInputs"] == [other_cli]
    assert len(after["systemChecks"]) == 1 and after["systemChecks"] != before["systemChecks"]
    assert run_check(after, tmp_path).returncode == 0
    # What the unit runs still changes it.
    assert results["another-port"]["unit"] != before["unit"]


def test_a_rule_refuses_at_build_time_naming_the_option_and_ignored_rules_warn(nix, nixpkgs_lib, tmp_path):
    results = evaluate(nix, nixpkgs_lib, {
        "fp8": host('services.sglang.kvCacheDtype = "fp8_e5m2";'),
        "ignored": host('services.sglang.kvCacheDtype = "fp8_e5m2";',
                        'services.sglang.ignoredRules = [ "fp8-kv-cache-without-calibrated-scales" ];'),
    }, tmp_path)
    refused = run_check(results["fp8"], tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert ("error: services.sglang.kvCacheDtype: [fp8-kv-cache-without-calibrated-scales] --kv-cache-dtype fp8_e5m2"
            in refused.stderr)
    assert results["fp8"]["failedAssertions"] == []  # evaluation succeeds: the build refuses
    warned = run_check(results["ignored"], tmp_path)
    assert warned.returncode == 0, warned.stderr
    assert "warning: ignored by services.sglang.ignoredRules: services.sglang.kvCacheDtype:" in warned.stderr


def test_exec_start_is_the_launcher_and_the_rendered_argv(default_host):
    argv = exec_argv(default_host["unit"]["serviceConfig"]["ExecStart"])
    assert argv[0] == f"{ENV_PATH}/bin/python3" and argv[1].endswith("-sglang-launcher.py")
    assert argv[2:] == default_host["final"]["finalArgs"]


# --- the VM test's machines --------------------------------------------------------------------

def test_the_vm_test_machines_pass_the_modules_checks(nix, nixpkgs_lib, tmp_path):
    """modules/tests/sglang-vm.nix with pkgs reduced to what it calls: its machines'
    configurations go through the module like any host, and its test script is Python."""
    import ast

    expr = f"""
      let
        lib = import {nixpkgs_lib};
        drv = name: extra: {{ type = "derivation"; inherit name; outPath = "/nix/store/0000000000000000000000000000000d-${{name}}"; }} // extra;
        pkgs = {{
          inherit lib;
          runCommand = name: env: script: drv name {{ passthru = env.passthru or {{ }}; }};
          runtimeShell = "/bin/sh";
          python3 = drv "python3" {{ }};
          stdenv.cc = drv "gcc-wrapper" {{ }};
          testers.runNixOSTest = spec: spec;
        }};
        spec = import ./modules/tests/sglang-vm.nix {{ inherit pkgs; blackwell-stack = drv "blackwell-stack" {{ }}; }};
        machine = node: import ./tests/nixos/eval.nix {{ libPath = {nixpkgs_lib}; config = node; }};
      in {{
        inherit (spec) name testScript;
        nodes = builtins.attrNames spec.nodes;
        machines = builtins.mapAttrs (_: machine) (removeAttrs spec.nodes [ "client" ]);
      }}"""
    result = subprocess.run([nix.binary, "--eval", "--strict", "--json", "--read-write-mode", "--expr", expr],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    got = json.loads(result.stdout)
    assert got["nodes"] == ["client", "garbage", "good", "slow"]
    machines = got["machines"]
    for name, machine in machines.items():
        assert machine["failedAssertions"] == [], (name, machine["failedAssertions"])
        unit = machine["unit"]
        assert unit["wantedBy"] == []  # the script starts it once the key file exists
        assert unit["serviceConfig"]["LoadCredential"] == ["api-key:/run/keys/sglang-api-key"]
        assert len(unit["serviceConfig"]["ExecStartPost"]) == 2, name  # readiness, then smoke
        assert machine["kernelModules"] == [] and machine["allowedTCPPorts"] == []
    assert machines["good"]["final"]["finalArgs"][machines["good"]["final"]["finalArgs"].index("--host") + 1] == "0.0.0.0"
    assert machines["good"]["final"]["loopbackOnly"] is False
    assert machines["garbage"]["final"]["loopbackOnly"] is True
    assert machines["slow"]["final"]["finalEnvironment"]["STAND_IN_LOAD_SECONDS"] == "3600"
    assert exec_argv(machines["slow"]["unit"]["serviceConfig"]["ExecStartPost"][0])[5] == "10"
    assert machines["good"]["unit"]["unitConfig"]["StartLimitBurst"] == 3  # the crash loop the script runs
    script = got["testScript"]
    ast.parse(script)
    for subtest in ("readiness gate and the smoke test pass", "never in the unit", "firewall stays closed",
                    "smoke gate stops the garbage server", "readiness timeout stops the unit", "start limit"):
        assert subtest in script, subtest


# --- decimals ----------------------------------------------------------------------------------

def test_a_decimal_passes_the_check_as_a_string_and_a_float_is_refused_with_the_fix(nix, nixpkgs_lib, tmp_path):
    """A decimal is a string in a profile: Nix's toString prints the float 0.88 as 0.880000, so the module's
    argv and the checker's render (str: 0.88) would differ and the system build would fail."""
    def with_fraction(value: str) -> str:
        return ('services.sglang.profile = lib.recursiveUpdate (lib.importJSON '
                f'{REPO}/modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json) '
                f'{{ flags."--mem-fraction-static" = {{ value = {value}; reason = "r"; source = "s"; }}; }};')
    results = evaluate(nix, nixpkgs_lib, {
        "string": host(with_fraction('"0.88"')),
        "float": host(with_fraction("0.88")),
        "out-of-range": host(with_fraction('"1.5"')),
        "extra": host('services.sglang.extraArgs = [ "--mem-fraction-static" "0.88" ];'),
    }, tmp_path)
    for name in ("string", "extra"):
        args = results[name]["final"]["finalArgs"]
        assert args[args.index("--mem-fraction-static") + 1] == "0.88", name
        checked = run_check(results[name], tmp_path)
        assert checked.returncode == 0, (name, checked.stderr)
    refused = run_check(results["float"], tmp_path)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert 'flags.--mem-fraction-static' in refused.stderr and '"value": "0.88"' in refused.stderr
    # The string is still the number SGLang reads: the range rule sees 1.5.
    out_of_range = run_check(results["out-of-range"], tmp_path)
    assert out_of_range.returncode == 1 and "[mem-fraction-static-out-of-range]" in out_of_range.stderr
