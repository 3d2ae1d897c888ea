"""The data registry (src/blackwell_stack/data/registry.py): every data file has a schema and one loader.

Every shipped data file loads through its loader; every loader refuses a file
of the wrong shape with a DataError naming the file and the field; the CLI
turns that into exit 3, never a traceback; and the Nix package of the CLI
carries exactly the files the registry says the CLI reads.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, cli_files, copy_data_root

from blackwell_stack.data import lock, profile, registry, schemas, stack
from blackwell_stack.errors import DataError, ExitCode
from blackwell_stack.kernel.inputs import patch_series, recipe
from blackwell_stack.kernel.inputs import sources as kernel_sources
from blackwell_stack.kernel.reproducibility import reference
from blackwell_stack.kernel.test import selection
from blackwell_stack.serve import flags
from blackwell_stack.stacks import libraries
from blackwell_stack.verify import baseline, degeneracy

# Each kind's loader, as the CLI calls it, given the file.
LOADERS: dict[str, Callable[[Path], Any]] = {
    "stack": lambda p: stack.load(p.parent.name),
    "lock": lock.load_lock,
    "stack-pyproject": lambda p: registry.load("stack-pyproject", file=p),
    "audit": lambda p: libraries.load_audit(stack.load(p.parent.name)),
    "profile": lambda p: profile.load_profile(str(p)),
    "rules": profile.load_rules,
    "flag-table": lambda p: flags.load_table(path=p),
    "recipe": recipe.load,
    "kernel-sources": kernel_sources.load,
    "reference-wheel": reference.load,
    "kernel-tests": selection.load_rules,
    "kernel-check": lambda p: registry.load("kernel-check", file=p),
    "patch": patch_series.parse_patch,
    "flake-lock": lambda p: registry.load("flake-lock", file=p),
    "flake-inputs": lambda p: registry.load("flake-inputs", file=p),
    "nixpkgs-config": lambda p: registry.load("nixpkgs-config", file=p),
    "wheel-libraries": lambda p: registry.load("wheel-libraries", file=p),
    "env-collisions": lambda p: registry.load("env-collisions", file=p),
    "baseline": baseline.load,
    "failure-text": degeneracy.failure_texts,
    "startup-imports": lambda p: registry.load("startup-imports", file=p),
    "gsm8k": lambda p: registry.load("gsm8k", file=p),
}

# Each kind, broken: (what is changed, the field the error must name). Valid JSON or TOML of the wrong shape.
MALFORMED: dict[str, tuple[Callable[[Any], Any], str]] = {
    "stack": (lambda d: {**d, "profiles": "qwen"}, "profiles"),
    "lock": (lambda d: {**d, "package": [{"name": "x", "dependencies": ["y"]}]}, "dependencies[0]"),
    "stack-pyproject": (lambda d: {**d, "tool": {"uv": {"index": {"url": "x"}}}}, "index"),
    "audit": (lambda d: {**d, "files": ["torch"]}, "files"),
    "profile": (lambda d: {**d, "flags": ["--tp-size", 8]}, "flags"),
    "rules": (lambda d: {**d, "rules": {"id": "x"}}, "rules"),
    "flag-table": (lambda d: {**d, "abbreviations": {"--tp": 8}}, "--tp"),
    "recipe": (lambda d: {**d, "environment": []}, "environment"),
    "kernel-sources": (lambda d: {**d, "fetchcontent": {"repo-fmt": "v1"}}, "repo-fmt"),
    "reference-wheel": (lambda d: {**d, "withdrawn": {}}, "withdrawn"),
    "kernel-tests": (lambda d: {**d, "files": {"test_norm.py": {"needs_gpus": "2", "why": "x"}}}, "needs_gpus"),
    "flake-lock": (lambda d: {**d, "nodes": []}, "nodes"),
    "flake-inputs": (lambda d: {**d, "inputs": {"nixpkgs": "abc"}}, "nixpkgs"),
    "baseline": (lambda d: {**d, "expectations": {"name": "x"}}, "expectations"),
    "failure-text": (lambda d: {**d, "failures": [{**d["failures"][0], "pattern": 7}]}, "pattern"),
    "startup-imports": (lambda d: {**d, "sglang": {"0.5.9": [{**d["sglang"]["0.5.9"][0], "source": "x.py"}]}},
                        "source"),
    "gsm8k": (lambda d: {**d, "thresholds": {"x": {**next(iter(d["thresholds"].values())), "kind": "guess"}}}, "kind"),
}
TEXT_KINDS = {"patch", "kernel-check"}
NIX_ONLY_KINDS = {f.key for f in registry.FILES if f.shape is schemas.NIX_ONLY}  # Nix's code says what it needs


def test_every_kind_has_a_loader_a_malformed_case_and_a_file():
    kinds = {f.key for f in registry.FILES}
    assert set(LOADERS) == kinds
    assert set(MALFORMED) | TEXT_KINDS | NIX_ONLY_KINDS == kinds
    assert NIX_ONLY_KINDS == {"nixpkgs-config", "wheel-libraries", "env-collisions"}
    assert all(f.files() for f in registry.FILES), [f.key for f in registry.FILES if not f.files()]


def test_every_data_file_of_the_repository_is_registered():
    """JSON, TOML and lock files beside the Nix code are data; each has a kind (the project's own pyproject.toml
    and the tests', benchmarks' and docs' files are not the project's data)."""
    registered = {p for f in registry.FILES for p in f.files()}
    found = {p for ext in ("json", "toml", "lock") for p in REPO.rglob(f"*.{ext}")
             if p.relative_to(REPO).parts[0] in ("stacks", "modules", "pkgs", "nix", "patches", "flake.lock")
             and "wheels" not in p.relative_to(REPO).parts}
    found.add(REPO / "flake.lock")
    assert found - registered == set(), "data files the registry does not know"


# Where the project was written is not what a user needs (the project runs elsewhere): a data file says what
# checked a value and what did not, never why the machine that wrote it could not.
WHERE_IT_WAS_WRITTEN = ("fetch limit", "cannot be reached from", "this machine", "fetched snapshot", "written on",
                        "search tool", "could be read here", "downloaded here", "too large to fetch")


def test_no_data_file_says_where_the_project_was_written():
    found = [(str(p.relative_to(REPO)), phrase) for f in registry.FILES for p in f.files() if p.suffix == ".json"
             for phrase in WHERE_IT_WAS_WRITTEN if phrase in p.read_text(encoding="utf-8").lower()]
    assert found == []


@pytest.mark.parametrize("kind,path", [(f.key, p) for f in registry.FILES for p in f.files()],
                         ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else v)
def test_every_shipped_file_loads_through_its_loader(kind, path):
    LOADERS[kind](path)


def _write_like(kind: registry.DataFile, dest: Path, data: Any) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if kind.format == "toml":
        dest.write_text(_toml(data))
    else:
        dest.write_text(json.dumps(data))
    return dest


def _toml(data: dict[str, Any]) -> str:
    """Just enough TOML for the broken files here: tables of scalars, lists of tables, inline values."""
    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, bool):
            return "true" if v else "false"
        return json.dumps(v)
    return "\n".join(f"{json.dumps(k)} = {value(v)}" for k, v in data.items()) + "\n"


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_each_loader_names_the_file_and_field_of_a_wrong_shape(kind, tmp_path, monkeypatch):
    kind_entry = registry.entry(kind)
    original = kind_entry.files()[0]
    raw = original.read_bytes()
    data = tomllib.loads(raw.decode()) if kind_entry.format == "toml" else json.loads(raw)
    change, field = MALFORMED[kind]
    # In a copy of the data, at the same place: loaders that find their file by name see the broken one.
    root = copy_data_root(tmp_path / "root")
    monkeypatch.setenv("BLACKWELL_STACK_ROOT", str(root))
    place = tmp_path / "package" if kind_entry.in_package else root
    base = registry.PACKAGE_ROOT if kind_entry.in_package else REPO
    if kind_entry.in_package:  # the copy stands for the package: its files are the project's, not a user's
        monkeypatch.setattr(registry, "PACKAGE_ROOT", place)
    broken = _write_like(kind_entry, place / original.relative_to(base), change(copy.deepcopy(data)))
    with pytest.raises(DataError) as err:
        LOADERS[kind](broken)
    text = str(err.value)
    assert str(broken) in text and field in text, text
    assert err.value.code == ExitCode.BAD_DATA


# The files that gave tracebacks when valid JSON of the wrong shape (issue 18), through the commands that read them.
CLI_CASES = [
    ("stacks/stable/wheels.json", lambda d: {**d, "files": ["torch"]}, ["plan"], "field 'files'"),
    ("stacks/stable/wheels.json", lambda d: {**d, "torch_pairs": {"pairs": []}}, ["plan", "stack-stable"],
     "field 'torch'"),
    ("modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json", lambda d: {**d, "flags": ["--tp-size", 8]},
     ["serve", "render"], "field 'flags'"),
    ("modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json", lambda d: {**d, "env": {"NCCL_P2P_LEVEL": "4"}},
     ["serve", "render"], "entry 'env', field 'NCCL_P2P_LEVEL'"),
    ("modules/rules.json", lambda d: {**d, "rules": {"id": "x"}}, ["serve", "check"], "field 'rules'"),
    ("modules/rules.json", lambda d: {**d, "rules": ["x"]}, ["serve", "check"], "field 'rules[0]'"),
    ("pkgs/sgl-kernel/kernel-tests.json", lambda d: {**d, "files": {"test_norm.py": {"needs_archs": "9.0a"}}},
     ["kernel", "test", "--tests", ".", "--dry-run"], "entry 'files.test_norm.py', field 'needs_archs'"),
    ("flake.lock", lambda d: {**d, "nodes": {"root": {"inputs": {"nixpkgs": "gone"}}}}, ["pins", "show"],
     "field 'nixpkgs'"),
    ("nix/flake-inputs.json", lambda d: {**d, "inputs": {"nixpkgs": "abc"}}, ["pins", "show"],
     "entry 'inputs', field 'nixpkgs'"),
]


@pytest.mark.proc
@pytest.mark.parametrize("rel,change,argv,named", CLI_CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_the_cli_refuses_a_wrong_shape_with_exit_3_naming_file_and_field(rel, change, argv, named, tmp_path):
    root = copy_data_root(tmp_path / "root")
    path = root / rel
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    env = {**os.environ, "BLACKWELL_STACK_ROOT": str(root)}
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", *argv], capture_output=True, text=True,
                            env=env, timeout=300)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == ExitCode.BAD_DATA, result.stdout[-2000:] + result.stderr
    assert str(path) in result.stderr and named in result.stderr, result.stderr


@pytest.mark.nix
def test_the_nix_package_carries_exactly_the_files_the_cli_reads(nix):
    listed = nix.eval("import ./pkgs/blackwell-stack/data.nix")
    assert sorted(REPO / p for p in listed) == cli_files()
