"""`blackwell-stack serve render|check|run`, the plan section, the launcher."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys

import pytest
from support.cli import run as cli

from blackwell_stack.data import stack as stack_data
from blackwell_stack.serve.plan import plan_section

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

WORKING = [
    "--quantization", "modelopt_fp4",
    "--attention-backend", "triton",
    "--moe-runner-backend", "flashinfer_cutlass",
    "--fp4-gemm-backend", "flashinfer_cudnn",
    "--disable-custom-all-reduce",
    "--kv-cache-dtype", "bf16",
    "--tensor-parallel-size", "8",
]


def test_render_prints_the_working_command():
    result = cli("serve", "render")
    assert result.returncode == 0, result.stderr
    line = next(text for text in result.stdout.splitlines() if "sglang.launch_server" in text)
    for word in WORKING:
        assert f" {word}" in line
    assert "SGLANG_ENABLE_JIT_DEEPGEMM=0" in line and "NCCL_P2P_LEVEL=4" in line


def test_render_json_and_set():
    result = cli("serve", "render", "--json", "--set", "tp-size=4", "--set", "kv-cache-dtype=null", "--", "--enable-metrics")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    argv = data["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert "--kv-cache-dtype" not in argv
    assert argv[-1] == "--enable-metrics"
    fired = {v["id"] for v in data["verdicts"]}
    assert {"tp-leaves-gpus-idle", "kv-cache-dtype-auto"} <= fired


def test_check_passes_on_the_profile_and_lists_every_rule(repo):
    result = cli("serve", "check", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rules = json.loads((repo / "modules" / "rules.json").read_text())["rules"]
    # The rules, then the secret-flag check (serve/secrets.py), which is not a rule one can ignore.
    assert [v["id"] for v in data["verdicts"]] == [r["id"] for r in rules] + ["secret-flag-on-command-line"]
    assert data["ok"] is True


@pytest.mark.parametrize(
    "args, rule",
    [
        (["--set", "attention-backend=fa3"], "sm120-attention-backend-without-kernels"),
        (["--set", "moe-runner-backend=flashinfer_trtllm"], "sm120-moe-flashinfer-trtllm"),
        (["--set", "disable-custom-all-reduce=false"], "custom-all-reduce-on-pcie"),
        (["--", "--fp4-gemm-runner-backend", "flashinfer_cudnn"], "sglang-rejects-flag"),
        (["--", "--api-k", "sk-0123"], "secret-flag-on-command-line"),
        (["--", "--admin-api=sk-0123"], "secret-flag-on-command-line"),
    ],
)
def test_check_fails_with_the_rule_and_exit_1(args, rule):
    result = cli("serve", "check", *args)
    assert result.returncode == 1
    assert any(text.startswith(f"FAIL [{rule}] ") for text in result.stdout.splitlines()), result.stdout


def test_check_misspelled_flag_suggests():
    result = cli("serve", "check", "--", "--fp4-gemm-runner-backend", "flashinfer_cudnn")
    assert "did you mean --fp4-gemm-backend?" in result.stdout


def test_set_switch_needs_true_or_false():
    result = cli("serve", "render", "--set", "disable-custom-all-reduce=maybe")
    assert result.returncode == 2
    assert "is a switch" in result.stderr and "Traceback" not in result.stderr


def test_unknown_profile_is_a_usage_error():
    result = cli("serve", "render", "--profile", "no-such-profile")
    assert result.returncode == 2
    assert "no such profile" in result.stderr and "qwen3.5-397b-a17b-nvfp4-sm120" in result.stderr


def test_run_dry_run_prints_the_command():
    result = cli("serve", "run", "--dry-run", "--python", "python3.12")
    assert result.returncode == 0, result.stderr
    assert "python3.12 -m sglang.launch_server --model-path nvidia/Qwen3.5-397B-A17B-NVFP4" in result.stdout


def test_run_refuses_a_bad_configuration_before_exec():
    result = cli("serve", "run", "--set", "kv-cache-dtype=fp8_e4m3")
    assert result.returncode == 1
    assert "fp8-kv-cache-without-calibrated-scales" in result.stderr


def test_run_execs_python_with_the_argv():
    # This Python has no sglang: the exec'd interpreter says so, which shows
    # that run replaced itself with `python -m sglang.launch_server`.
    result = cli("serve", "run", "--python", sys.executable)
    assert result.returncode != 0
    assert "No module named 'sglang'" in result.stderr


def test_plan_section_shows_the_service_command():
    stack = stack_data.load()
    section = plan_section(stack, "service")
    items = {i.name: i for i in section.items}
    assert "sglang.launch_server" in items["service command"].value
    assert "--fp4-gemm-backend flashinfer_cudnn" in items["service command"].value
    assert items["model"].verified is False and items["model"].note
    assert f"blackwell-stack serve check --stack {stack.name}" in section.commands


# --- the service's launcher (src/blackwell_stack/serve/launcher.py) ----------------------------

@pytest.fixture()
def launcher(repo):
    spec = importlib.util.spec_from_file_location("sglang_launcher", repo / "src/blackwell_stack/serve/launcher.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launcher_reads_the_credentials(launcher, tmp_path, monkeypatch):
    (tmp_path / "api-key").write_text("s3cret\n")
    (tmp_path / "admin-api-key").write_text("adm1n\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert launcher.read_credential("api-key") == "s3cret"
    assert launcher.read_credential("admin-api-key") == "adm1n"
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    assert launcher.read_credential("api-key") is None


def test_launcher_redacts_the_key_in_logs(launcher, caplog):
    old = logging.getLogRecordFactory()
    try:
        launcher.redact_in_logs(["s3cret", "adm1n"])
        with caplog.at_level(logging.INFO):
            logging.getLogger("sglang").info("server_args=%s", "ServerArgs(api_key='s3cret', admin_api_key='adm1n')")
        assert "s3cret" not in caplog.text and "adm1n" not in caplog.text and "<redacted>" in caplog.text
    finally:
        logging.setLogRecordFactory(old)


def test_launcher_keeps_the_key_off_the_command_line(repo, tmp_path):
    # The exec'd command line carries no key; argparse gets it inside the process.
    (tmp_path / "api-key").write_text("s3cret")
    script = repo / "src/blackwell_stack/serve/launcher.py"
    probe = (
        "import runpy, sys, runpy as r\n"
        "def fake(name, run_name, alter_sys):\n"
        "    print(open('/proc/self/cmdline','rb').read().count(b's3' + b'cret'), sys.argv[-2:])\n"
        "r.run_module = fake\n"
        f"sys.argv = [{str(script)!r}, '--port', '1']\n"
        f"exec(compile(open({str(script)!r}).read(), 'launcher', 'exec'))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env={"CREDENTIALS_DIRECTORY": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0 ['--api-key', 's3cret']"
    refused = subprocess.run([sys.executable, str(script), "--api-key", "x"], capture_output=True, text=True)
    assert refused.returncode != 0 and "apiKeyFile" in refused.stderr


def test_check_on_the_current_stack_lists_versions_and_unverified_entries():
    result = cli("serve", "check", "--profile", "qwen3.5-397b-a17b-nvfp4-sm120-current", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["runtime"]["sglang"], data["runtime"]["flashinfer"]) == ("0.5.23", "0.7.2")
    verdicts = {v["id"]: v for v in data["verdicts"]}
    assert verdicts["sm120-trtllm-mha-refused-by-sglang"]["applies"] == "no"
    assert {u["name"] for u in data["unverified"]} >= {"--attention-backend", "--fp4-gemm-backend"}
    text = cli("serve", "check", "--profile", "qwen3.5-397b-a17b-nvfp4-sm120-current").stdout
    assert "sglang 0.5.23, flashinfer 0.7.2" in text and "not verified for this stack" in text
    assert "do not apply to sglang 0.5.23" in text
    argv = json.loads(cli("serve", "render", "--profile", "qwen3.5-397b-a17b-nvfp4-sm120-current", "--json").stdout)["argv"]
    assert argv[argv.index("--tp-size") + 1] == "8"  # 0.5.23's primary spelling


# --- serve on a stack: the flags and rules of the SGLang its lock holds -------------------------

@pytest.mark.parametrize("stack", ["stable", "current"])
def test_every_profile_of_a_stack_passes_check_on_its_lock(stack):
    from blackwell_stack.data import stack as stack_data

    versions = stack_data.load(stack).versions()
    profiles = stack_data.load(stack).profiles
    for profile in [None, *profiles]:
        args = ["serve", "check", "--stack", stack, "--json"] + (["--profile", profile] if profile else [])
        result = cli(*args)
        assert result.returncode == 0, (profile, result.stdout[-2000:], result.stderr)
        data = json.loads(result.stdout)
        assert data["ok"] is True
        assert data["profile"] == (profile or profiles[0])
        assert data["runtime"] == {"sglang": versions["sglang"], "flashinfer": versions["flashinfer"],
                                   "source": f"stacks/{stack}/uv.lock"}


def test_render_on_the_current_stack_takes_its_first_profile_and_0_5_23s_flags():
    data = json.loads(cli("serve", "render", "--stack", "current", "--json").stdout)
    assert data["profile"] == "qwen3.5-397b-a17b-nvfp4-sm120-current"
    assert data["runtime"]["source"] == "stacks/current/uv.lock"
    argv = data["argv"]
    assert argv[argv.index("--tp-size") + 1] == "8" and "--tensor-parallel-size" not in argv
    v2 = json.loads(cli("serve", "render", "--stack", "current", "--profile", "qwen3.5-397b-a17b-nvfp4-v2-sm120-current",
                        "--json").stdout)["argv"]
    assert v2[v2.index("--quantization") + 1] == "modelopt_mixed"


def test_a_profile_of_another_stack_is_refused_with_the_fix():
    result = cli("serve", "check", "--stack", "stable", "--profile", "qwen3.5-397b-a17b-nvfp4-v2-sm120-current")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is not made for the stable stack (sglang 0.5.9, flashinfer 0.6.5); it is for the stacks current" in result.stderr
    assert "hint: pass --stack current, or --profile with one of the stable stack's profiles: qwen3.5-397b-a17b-nvfp4-sm120" in result.stderr


def test_a_profile_file_without_stacks_is_held_to_the_stacks_versions(repo, tmp_path):
    data = json.loads((repo / "modules" / "profiles" / "qwen3.5-397b-a17b-nvfp4-v2-sm120-current.json").read_text())
    del data["stacks"]
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    assert cli("serve", "check", "--stack", "current", "--profile", str(path)).returncode == 0
    refused = cli("serve", "check", "--stack", "stable", "--profile", str(path))
    assert refused.returncode == 2
    assert "it is for sglang 0.5.23, flashinfer 0.7.2" in refused.stderr and "pass --stack current" in refused.stderr


def test_a_stack_without_a_lock_names_the_command_that_makes_it():
    result = cli("serve", "render", "--stack", "nightly")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "hint: run `blackwell-stack stack lock nightly --wheels DIR`" in result.stderr


def test_plan_shows_each_stacks_service_on_its_own_versions():
    from blackwell_stack.cli.plan import sections
    from blackwell_stack.data.stack import load

    found, _refused = sections([load("current"), load("stable"), load("nightly")], None)
    current, stable, nightly = [s for s in found if s.key.startswith("service")]
    assert [s.key for s in (current, stable, nightly)] == ["service-current", "service-stable", "service-nightly"]
    items = {i.name: i for i in current.items}
    assert items["runtime"].value == "sglang 0.5.23, flashinfer 0.7.2" and items["runtime"].source == "stacks/current/uv.lock"
    assert items["flag table"].value.startswith("sglang 0.5.23 ")
    assert "--tp-size 8" in items["service command"].value
    assert "blackwell-stack serve check --stack current" in current.commands
    assert {i.name: i for i in stable.items}["runtime"].value == "sglang 0.5.9, flashinfer 0.6.5"
    # No lock: the profile's own runtime block, and the command that makes the lock.
    runtime = {i.name: i for i in nightly.items}["runtime"]
    assert runtime.value == "sglang 0.5.9, flashinfer 0.6.5" and "blackwell-stack stack lock nightly --wheels DIR" in runtime.source
    assert [s.key for s in sections([load("current")], None)[0]][1:] == ["stack-current", "service", "doctor", "verify"]


@pytest.mark.parametrize(("setting", "refused_by"), [
    ("mem-fraction-static=1.5", "mem-fraction-static-out-of-range"),
    ("mem-fraction-static=nan", "mem-fraction-static-out-of-range"),
    ("mem-fraction-static=0", "mem-fraction-static-out-of-range"),
    ("mem-fraction-static=0.25", None),
    ("context-length=-1", "context-length-not-positive"),
    ("model-path=", "model-path-empty"),
    ("model-path=null", "sglang-rejects-flag"),  # SGLang's parser requires it
    ("revision=main", "model-revision-not-a-commit"),
    ("revision=v1.0", "model-revision-not-a-commit"),
    ("revision=0123456", "model-revision-not-a-commit"),  # abbreviated
    ("revision=0123456789abcdef0123456789abcdef01234567", None),
])
def test_values_sglang_would_take_and_fail_on_later_are_refused(setting, refused_by):
    result = cli("serve", "check", "--set", setting, "--json")
    verdicts = {v["id"]: v for v in json.loads(result.stdout)["verdicts"]}
    fired = sorted(i for i, v in verdicts.items() if v["fired"] and v["severity"] == "error")
    assert fired == ([refused_by] if refused_by else []), (setting, fired)
    assert result.returncode == (1 if refused_by else 0), result.stderr


def test_check_prints_failures_and_warnings_first_and_the_passing_rules_as_a_count():
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # into a pipe: every line whole
    result = cli("serve", "check", "--stack", "current", "--set", "kv-cache-dtype=fp8_e4m3", env=env)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[0].startswith("== serve check (")
    assert lines[1].startswith("FAIL [fp8-kv-cache-without-calibrated-scales] --kv-cache-dtype fp8_e4m3")
    assert lines[2].strip() == "fix: --set kv-cache-dtype=bf16"
    assert lines[3].startswith("WARN [model-revision-unpinned]")
    assert " ok " not in result.stdout and "tp-not-positive" not in result.stdout  # a passing rule is counted
    verdicts = json.loads(cli("serve", "check", "--stack", "current", "--set", "kv-cache-dtype=fp8_e4m3",
                              "--json").stdout)["verdicts"]
    passing = sum(not v["fired"] for v in verdicts)
    assert lines[-1].startswith("1 error, 1 warning, 4 unverified profile entries; "
                                f"{passing} of {len(verdicts)} rules pass (")
    assert lines[-1].endswith("; -v lists every rule")
    every = cli("serve", "check", "--stack", "current", "--set", "kv-cache-dtype=fp8_e4m3", "-v").stdout
    assert all(v["id"] in every for v in verdicts) and "== every rule ==" in every


def test_a_module_config_of_another_shape_is_refused_saying_whose_file_it_takes(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"overrides": {}, "extraArgs": "--tp 8", "env": {}, "ignoredRules": [], "argv": []}')
    result = cli("serve", "check", "--module-config", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "extraArgs" in result.stderr and "pass the file services.sglang writes" in result.stderr
