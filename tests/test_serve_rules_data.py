"""modules/rules.json and the profiles as data: every rule states its versions, reads only
flags that exist in the tables of the versions it holds for, and cites upstream or the
project's docs; every profile names its stacks and has a flag table for its SGLang."""

from __future__ import annotations

import copy
import json
import re

import pytest

from blackwell_stack.data import versions
from blackwell_stack.data.profile import available_profiles, load_profile, load_rules
from blackwell_stack.errors import DataError
from blackwell_stack.serve import flags

RULES = load_rules()
TABLES = {v: flags.load_table(v).data for v in flags.available_versions()}
# Sections of docs/reference-deployment.md that data may cite.
DOC_SECTIONS = {"versions", "server-flags", "fp4-gemm-backend", "kv-cache-dtype", "custom-all-reduce", "environment",
                "results", "failures-and-fixes"}


def tables_of(rule):
    """The flag tables of the SGLang versions a rule holds for (every table for a version-independent rule)."""
    held = rule["versions"].get("sglang", {}).get("holds")
    if held is None:
        return list(TABLES.values())
    return [t for v, t in TABLES.items() if any(versions.holds(v, r) for r in held)]


def flag_reads(node):
    """(flag, literal compared with it) for every flags var in a condition; literal None when not compared."""
    if isinstance(node, dict):
        for op in ("eq", "ne", "in"):
            if op in node:
                a, b = node[op]
                if isinstance(a, dict) and a.get("var", [None])[0] == "flags":
                    values = b if op == "in" else [b]
                    for value in values:
                        yield a["var"][1], value
                    return
        if node.get("var", [None])[0] == "flags":
            yield node["var"][1], None
            return
        for value in node.values():
            yield from flag_reads(value)
    elif isinstance(node, list):
        for item in node:
            yield from flag_reads(item)


@pytest.mark.parametrize("rule", [r for r in RULES["rules"] if "condition" in r], ids=lambda r: r["id"])
def test_a_rule_reads_only_flags_its_versions_have(rule):
    tables = tables_of(rule)
    assert tables, f"{rule['id']} holds for no SGLang that has a flag table"
    messages_flags = re.findall(r"\{flags\.([^}]+)\}", rule["message"])
    for flag, value in list(flag_reads(rule["condition"])) + [(f, None) for f in messages_flags]:
        for table in tables:
            assert flag in table["options"], (rule["id"], flag, table["sglang_version"])
        if isinstance(value, str):
            # Compared with a value at least one of its versions accepts (a typo would never match).
            assert any(value in (t["flags"][t["options"][flag]]["choices"] or [value]) for t in tables), (rule["id"], flag, value)


def test_every_rule_states_its_versions_and_scoped_ones_name_both_checked_sglangs():
    for rule in RULES["rules"]:
        assert isinstance(rule["versions"], dict), rule["id"]
        spec = rule["versions"].get("sglang")
        if spec is not None:
            stated = spec["holds"] + spec.get("not", [])
            for version in TABLES:
                assert any(versions.holds(version, r) for r in stated), (rule["id"], version, "truth not stated")


def test_sources_cite_upstream_or_a_section_of_the_docs(repo):
    paths = [repo / "modules" / "rules.json", *sorted((repo / "modules" / "profiles").glob("*.json"))]
    for path in paths:
        text = path.read_text()
        assert re.search(r"section \d", text) is None, path.name  # no citations of unnamed notes
        for anchor in re.findall(r"docs/reference-deployment\.md#([a-z0-9-]+)", text):
            assert anchor in DOC_SECTIONS, (path.name, anchor)


def test_every_profile_names_its_stacks_and_has_a_table():
    stacks = {}
    for name in available_profiles():
        profile = load_profile(name)
        assert profile.stacks, name
        assert profile.runtime().sglang in TABLES, name
        for stack in profile.stacks:
            stacks.setdefault(stack, []).append(name)
    assert stacks["stable"] == stacks["nightly"] == ["qwen3.5-397b-a17b-nvfp4-sm120"]
    assert sorted(stacks["current"]) == ["qwen3.5-397b-a17b-nvfp4-sm120-current", "qwen3.5-397b-a17b-nvfp4-v2-sm120-current"]


def test_current_profiles_say_what_is_unverified():
    v1 = load_profile("qwen3.5-397b-a17b-nvfp4-sm120-current")
    v2 = load_profile("qwen3.5-397b-a17b-nvfp4-v2-sm120-current")
    assert (v1.runtime().sglang, v1.runtime().flashinfer) == ("0.5.23", "0.7.2")
    assert v1.data["model"]["id"] == "nvidia/Qwen3.5-397B-A17B-NVFP4" and v2.data["model"]["id"] == "nvidia/Qwen3.5-397B-A17B-NVFP4-V2"
    assert {n for n, _ in v1.unverified()} == {"--attention-backend", "--fp4-gemm-backend", "SGLANG_ENABLE_JIT_DEEPGEMM", "NCCL_P2P_LEVEL"}
    assert {n for n, _ in v2.unverified()} >= {n for n, _ in v1.unverified()} | {"--kv-cache-dtype", "--moe-runner-backend"}
    assert v2.data["flags"]["--quantization"]["value"] == "modelopt_mixed"
    # sglang 0.5.23 no longer reads SGLANG_DISABLE_CUDNN_CHECK (its cuDNN check is gone).
    assert "SGLANG_DISABLE_CUDNN_CHECK" not in v1.data["env"] and "SGLANG_DISABLE_CUDNN_CHECK" in load_profile().data["env"]
    assert load_profile().unverified() == []


def _write(tmp_path, data):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "patch, problem",
    [
        (lambda r: r.pop("versions"), "versions"),
        (lambda r: r.update(versions={"torch": {"holds": [">=2.12.1"]}}), "not a runtime component: sglang or flashinfer"),
        (lambda r: r.update(versions={"sglang": {"not": [">=0.5.9"]}}), "holds.*is missing"),
        (lambda r: r.update(versions={"sglang": {"holds": ">=0.5.9"}}), "holds.*must be a non-empty list"),
        (lambda r: r.update(versions={"sglang": {"holds": [{"min": "0.5.9"}]}}), "must be a non-empty string, found an object"),
        (lambda r: r.update(versions={"sglang": {"holds": [">=v0.5.9"]}}), "PEP 440"),
        (lambda r: r.update(versions={"sglang": {"holds": ["<=0.5.23"], "not": [">=0.5.23"]}}), "both held"),
    ],
)
def test_malformed_versions_are_refused_with_the_rule_and_field(tmp_path, patch, problem):
    data = copy.deepcopy(RULES)
    patch(data["rules"][1])
    with pytest.raises(DataError, match=problem) as err:
        load_rules(_write(tmp_path, data))
    assert data["rules"][1]["id"] in str(err.value)


def test_a_profile_runtime_that_is_not_a_version_is_refused(tmp_path):
    data = copy.deepcopy(load_profile().data)
    data["runtime"]["flashinfer"] = "latest"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"runtime.*flashinfer.*PEP 440"):
        load_profile(str(path))


def test_an_unverified_profile_entry_must_say_why(tmp_path):
    data = copy.deepcopy(load_profile().data)
    data["flags"]["--attention-backend"]["verified"] = False
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match="unverified_reason"):
        load_profile(str(path))


@pytest.mark.parametrize(
    "patch, problem",
    [
        (lambda p: p["hardware"].update(gpus=0), r"hardware.*gpus.*at least 1"),
        (lambda p: p["model"].pop("uses_mla"), r"model.*uses_mla.*missing"),
        (lambda p: p["flags"].update({"quantization": p["flags"].pop("--quantization")}), r"'quantization' is not a flag written with its dashes"),
        (lambda p: p["flags"]["--quantization"].pop("source"), r"flags.*--quantization.*source.*missing"),
        (lambda p: p["env"][next(iter(p["env"]))].update(value=1), r"env.*value.*a string"),
        (lambda p: p.update(stacks="stable"), r"stacks.*a list"),
    ],
)
def test_a_malformed_profile_is_refused_naming_its_field(tmp_path, patch, problem):
    data = copy.deepcopy(load_profile().data)
    patch(data)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=problem):
        load_profile(str(path))
