"""modules/sglang.nix (with modules/sglang/) against its data: the lib entry points it uses, and that
every rule names an option the module declares.

The module itself is evaluated with nixpkgs.lib's evalModules in
test_serve_module_eval.py, and its unit's commands are run in test_serve_unit_run.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.nix

RULES = {r["id"]: r for r in json.loads((Path(__file__).resolve().parent.parent / "modules" / "rules.json").read_text())["rules"]}


def test_lib_default_exposes_the_service_and_renders_the_profile(nix):
    from blackwell_stack.data.profile import load_profile, load_rules
    from blackwell_stack.serve import flags
    from blackwell_stack.serve.render import render

    argv = nix.eval("(import ./lib).sglangService.render { }).argv".replace("(import", "((import", 1))
    assert argv == render(load_profile(), flags.load_table(), load_rules()).argv


def test_the_build_time_check_names_option_rule_and_source():
    from blackwell_stack.serve import module_check
    from blackwell_stack.serve.service import configure

    service = configure(overrides={"kv-cache-dtype": "fp8_e5m2"})
    texts = [module_check.verdict_text(v) for v in service.fired("error")]
    assert texts == [
        "services.sglang.kvCacheDtype: [fp8-kv-cache-without-calibrated-scales] --kv-cache-dtype fp8_e5m2: the checkpoint "
        "has no calibrated k/v scales, so an FP8 KV cache falls back to scale 1.0 and silently degrades long-context "
        "accuracy; use bf16 (source: " + RULES["fp8-kv-cache-without-calibrated-scales"]["source"] + ")"
    ]


def module_text(repo: Path) -> str:
    """modules/sglang.nix and the files it is made of (modules/sglang/: options, assertions, unit)."""
    files = [repo / "modules" / "sglang.nix", *sorted((repo / "modules" / "sglang").glob("*.nix"))]
    return "\n".join(f.read_text() for f in files)


def test_every_rule_names_a_declared_option(repo):
    module = module_text(repo)
    declared = set(re.findall(r"^\s{4}([A-Za-z0-9.]+) = (?:mkOption|profileFlagOption )", module, re.M))
    declared |= {f"model.{m}" for m in re.findall(r"^\s{6}(id|revision|path) = mkOption", module, re.M)}
    rules = json.loads((repo / "modules" / "rules.json").read_text())["rules"]
    for rule in rules:
        option = rule["option"].split(" ")[0]
        assert option.startswith("services.sglang."), rule["id"]
        assert option.removeprefix("services.sglang.") in declared, (rule["id"], option)


def test_module_defaults_come_from_the_profile_and_the_flag_table(repo):
    module = module_text(repo)
    profile = json.loads((repo / "modules" / "profiles" / "qwen3.5-397b-a17b-nvfp4-sm120.json").read_text())
    for flag in profile["flags"]:
        assert f'"{flag}" = cfg.' in module, f"{flag} has no typed option"
    for flag in ("--attention-backend", "--moe-runner-backend", "--fp4-gemm-backend", "--kv-cache-dtype", "--quantization"):
        assert f'choicesOf "{flag}"' in module, f"{flag}: option type is not the flag table's enum"
    # The smoke check (issue 6) is imported, after the readiness gate.
    assert "./sglang-smoke.nix" in module and (repo / "modules" / "sglang-smoke.nix").is_file()
    assert "ExecStartPost = lib.mkBefore" in module
