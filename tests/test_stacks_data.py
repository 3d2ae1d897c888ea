"""The stacks as data (stacks/<name>/): each stack.json is valid, each lock
parses and names a sha256 for every file, the key versions are the ones the
project runs, every [tool.uv] override says why, and lib/stacks.nix (real nix)
reads the same versions and throws the same message as the Python side."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from blackwell_stack.errors import StackError
from blackwell_stack.serve.profile import load_profile
from blackwell_stack.stacks import lock as locking
from blackwell_stack.stacks import model, wheels

REPO = Path(__file__).resolve().parent.parent
LOCKED = [n for n in model.names() if model.load(n).locked]

# What the project runs (issue "One lock, two realizations"; docs/stacks.md).
EXPECTED = {
    "stable": {"sglang": "0.5.9", "flashinfer": "0.6.5", "torch": "2.12.1"},
}


def test_the_stacks_are_stable_and_nightly_and_stable_is_the_default():
    assert {"stable", "nightly"} <= set(model.names())
    assert model.default_name() == "stable"
    assert model.load("stable").locked
    assert not model.load("nightly").locked, "the nightly lock needs its vanished wheels (docs/stacks.md)"


@pytest.mark.parametrize("name", model.names())
def test_stack_json_is_valid_and_names_its_profiles(name):
    stack = model.load(name)
    assert stack.python == "3.12" and stack.system == "x86_64-linux"
    for profile in stack.data["profiles"]:
        assert load_profile(profile).name == profile
    # The same uv for every stack: the uv-bin of the locked uv2nix (nix/flake-inputs.json).
    assert stack.uv_version == "0.10.7"
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert f"uv=={stack.uv_version}" in pyproject["project"]["optional-dependencies"]["test"]


@pytest.mark.parametrize("name", LOCKED)
def test_lock_parses_and_every_file_has_a_sha256(name):
    stack = model.load(name)
    lock = stack.lock()
    assert lock.data["version"] == 1 and lock.data["revision"] == 3  # what uv 0.10.7 writes
    assert lock.data["requires-python"] == "==3.12.*"
    files = 0
    for pkg in lock.packages.values():
        if pkg.source.get("virtual"):
            continue
        assert pkg.wheels, f"{pkg.name}: the stacks are wheel-only"
        for artifact in pkg.artifacts():
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", artifact.get("hash", "")), (pkg.name, artifact)
            files += 1
    assert files > len(lock.packages)
    locking.validate(stack, lock)


@pytest.mark.parametrize("name", LOCKED)
def test_every_package_has_a_wheel_for_the_target(name):
    stack = model.load(name)
    lock = stack.lock()
    for pkg in lock.packages.values():
        if pkg.source.get("virtual"):
            continue
        assert wheels.uv_choice(pkg) is not None, pkg.name
        assert wheels.uv2nix_choice(pkg) is not None, pkg.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_key_versions_are_the_ones_the_project_runs(name):
    stack = model.load(name)
    lock = stack.lock()
    assert stack.versions(lock) == EXPECTED[name]
    # flashinfer's two halves are versioned together.
    assert lock.get("flashinfer-cubin").version == lock.get("flashinfer-python").version


def test_the_stable_stack_runs_the_seed_profile():
    stack = model.load("stable")
    versions = stack.versions()
    runtime = load_profile(stack.data["profiles"][0]).data["runtime"]
    assert (runtime["sglang"], runtime["flashinfer"]) == (versions["sglang"], versions["flashinfer"])


@pytest.mark.parametrize("name", model.names())
def test_the_source_built_kernel_is_kept_out_of_the_lock(name):
    stack = model.load(name)
    kernel = stack.kernel
    assert kernel["from"] == "source"
    sources = json.loads((REPO / "pkgs" / "sgl-kernel" / "sources.json").read_text())
    assert kernel["version"] == sources["sglang"]["sgl_kernel_version"]
    pyproject = tomllib.loads((stack.path / "pyproject.toml").read_text())
    assert kernel["package"] in pyproject["tool"]["uv"]["exclude-dependencies"]
    if stack.locked:
        lock = stack.lock()
        assert lock.get(kernel["package"]) is None
        assert kernel["package"] in lock.excludes


def _commented_entries(text: str, key: str) -> dict[str, str]:
    """Each quoted entry of a [tool.uv] list, with the comment block above it (entries in a row share it)."""
    body = text.split(f"{key} = [", 1)[1].split("\n]", 1)[0]
    out: dict[str, str] = {}
    comment: list[str] = []
    after_entry = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            if after_entry:
                comment, after_entry = [], False
            comment.append(stripped.lstrip("# "))
        elif stripped.startswith('"'):
            out[stripped.split('"')[1]] = " ".join(comment)
            after_entry = True
        elif not stripped:
            comment, after_entry = [], False
    return out


@pytest.mark.parametrize("name", model.names())
def test_every_override_says_why_and_from_where(name):
    text = (REPO / "stacks" / name / "pyproject.toml").read_text()
    overrides = _commented_entries(text, "override-dependencies")
    assert overrides
    for entry, comment in overrides.items():
        assert comment, f"{name}: override {entry!r} has no comment"
        # The reason names what it replaces: a pin of sglang's METADATA.
        assert "sglang pins" in comment or "sglang" in comment, (entry, comment)
    parsed = tomllib.loads(text)["tool"]["uv"]
    assert set(overrides) == set(parsed["override-dependencies"])
    excludes = text.split("exclude-dependencies", 1)[0].rsplit("\n\n", 1)[-1]
    assert "never taken from PyPI" in excludes or "never" in excludes


def test_torchvision_is_paired_by_hand_because_the_torch_override_unpins_it():
    parsed = tomllib.loads((REPO / "stacks" / "stable" / "pyproject.toml").read_text())
    deps = parsed["project"]["dependencies"]
    assert "torchvision==0.27.1" in deps
    assert "torch==2.12.1" in parsed["tool"]["uv"]["override-dependencies"]


# -- lib/stacks.nix against the Python side, on the same files ---------------------------


@pytest.mark.nix
def test_nix_lists_the_same_stacks_and_default(nix):
    got = nix.eval("let s = import ./lib/stacks.nix; in { inherit (s) names default status; }")
    assert got["names"] == model.names()
    assert got["default"] == model.default_name()
    assert got["status"] == {n: {"locked": model.load(n).locked, "command": model.load(n).lock_command}
                             for n in model.names()}


@pytest.mark.nix
@pytest.mark.parametrize("name", LOCKED)
def test_nix_reads_the_same_versions_from_the_lock(nix, name):
    stack = model.load(name)
    assert nix.eval(f'(import ./lib/stacks.nix).versions "{name}"') == stack.versions()
    root = [p for p in stack.lock().packages.values() if p.source.get("virtual") == "."]
    assert nix.eval(f'(import ./lib/stacks.nix).rootDependencies "{name}"') == root[0].dependencies


@pytest.mark.nix
@pytest.mark.parametrize("name", [n for n in model.names() if not model.load(n).locked])
def test_a_stack_without_a_lock_throws_the_same_message_with_the_command(nix, name):
    stack = model.load(name)
    err = nix.eval_error(f'(import ./lib/stacks.nix).versions "{name}"')
    assert stack.missing_lock_message() in err
    assert f"Make it with: {stack.lock_command}" in err
    with pytest.raises(StackError) as info:
        stack.versions()
    assert info.value.message == stack.missing_lock_message()
    assert info.value.hint == f"run `{stack.lock_command}`"


@pytest.mark.nix
def test_an_unknown_stack_is_refused_on_both_sides(nix):
    err = nix.eval_error('(import ./lib/stacks.nix).meta "current-typo"')
    assert 'no stack "current-typo"' in err
    with pytest.raises(StackError) as info:
        model.load("current-typo")
    assert "no stack 'current-typo'" in info.value.message


@pytest.mark.nix
@pytest.mark.parametrize("name", LOCKED)
def test_nix_finds_each_wheel_the_python_side_chooses(nix, name):
    """lib/stacks.nix `lockedWheel` (what nix/fixups/wheel-choice.nix fetches) finds uv's file by name."""
    stack = model.load(name)
    lock = stack.lock()
    picks = {p.name: wheels.filename(wheels.uv_choice(p)) for p in lock.packages.values() if p.wheels}
    sample = {k: picks[k] for k in ("torch", "cryptography", "soundfile", "sglang")}
    expr = "let s = import ./lib/stacks.nix; in {" + "".join(
        f' "{k}" = (s.lockedWheel "{name}" "{k}" "{v}").hash;' for k, v in sample.items()) + " }"
    got = nix.eval(expr)
    for k, v in sample.items():
        wheel = next(w for w in lock.get(k).wheels if wheels.filename(w) == v)
        assert got[k] == wheel["hash"]
