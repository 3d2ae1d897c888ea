"""The stacks as data (stacks/<name>/): each stack.json is valid, each lock
parses and names a sha256 for every file, the key versions are the ones the
project runs, every [tool.uv] override says why, and lib/stacks.nix (real nix)
reads the same versions and throws the same message as the Python side."""

from __future__ import annotations

import json
import re
import tomllib

import pytest
from support import REPO

from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.data.profile import load_profile
from blackwell_stack.errors import StackError
from blackwell_stack.stacks import lock as locking

LOCKED = [n for n in stack_data.names() if stack_data.load(n).locked]

# What the project runs (docs/stacks.md): the seed's versions on PyPI's torch
# (stable), and SGLang 0.5.23 as released with what its METADATA requires (current).
EXPECTED = {
    "stable": {"sglang": "0.5.9", "flashinfer": "0.6.5", "torch": "2.12.1"},
    "current": {"sglang": "0.5.23", "flashinfer": "0.7.2", "torch": "2.14.1"},
}
# The files of the key packages each lock installs on x86_64-linux / CPython 3.12.
KEY_FILES = {
    "current": {
        "sglang": "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl",
        "sglang-kernel": "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl",
        "torch": "torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl",
        "flashinfer-python": "flashinfer_python-0.7.2-py3-none-any.whl",
        "triton": "triton-3.8.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        "torchvision": "torchvision-0.29.1-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torchaudio": "torchaudio-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    },
}


def test_the_stacks_and_their_default():
    assert {"stable", "nightly", "current"} <= set(stack_data.names())
    assert stack_data.default_name() == "stable"
    assert stack_data.load("stable").locked and stack_data.load("current").locked
    assert not stack_data.load("nightly").locked, "the nightly lock needs its vanished wheels (docs/stacks.md)"


@pytest.mark.parametrize("name", stack_data.names())
def test_stack_json_is_valid_and_names_its_profiles(name):
    stack = stack_data.load(name)
    assert stack.python == "3.12" and stack.system == "x86_64-linux"
    for profile in stack.data["profiles"]:
        assert load_profile(profile).name == profile
    # The same uv for every stack: the uv-bin of the locked uv2nix (nix/flake-inputs.json).
    assert stack.uv_version == "0.10.7"
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert f"uv=={stack.uv_version}" in pyproject["project"]["optional-dependencies"]["test"]


@pytest.mark.parametrize("name", LOCKED)
def test_lock_parses_and_every_file_has_a_sha256(name):
    stack = stack_data.load(name)
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
    stack = stack_data.load(name)
    lock = stack.lock()
    for pkg in lock.packages.values():
        if pkg.source.get("virtual"):
            continue
        assert wheels.uv_choice(pkg) is not None, pkg.name
        assert wheels.uv2nix_choice(pkg) is not None, pkg.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_key_versions_are_the_ones_the_project_runs(name):
    stack = stack_data.load(name)
    lock = stack.lock()
    assert stack.versions(lock) == EXPECTED[name]
    cubin = lock.get("flashinfer-cubin")
    if name == "current":
        # sglang 0.5.23 does not require it and PyPI has no 0.7 release of it (stacks/current/pyproject.toml).
        assert cubin is None
    else:
        # flashinfer's two halves are versioned together.
        assert cubin.version == lock.get("flashinfer-python").version


@pytest.mark.parametrize("name", sorted(KEY_FILES))
def test_key_files_are_the_ones_the_project_runs(name):
    lock = stack_data.load(name).lock()
    for package, file in KEY_FILES[name].items():
        assert wheels.filename(wheels.uv_choice(lock.get(package))) == file, package


@pytest.mark.network
@pytest.mark.parametrize("name", sorted(KEY_FILES))
def test_key_files_have_pypis_own_sha256(name):
    """The lock's sha256 of each key file is the one PyPI's JSON API publishes for it."""
    from blackwell_stack import pypi

    lock = stack_data.load(name).lock()
    for package, file in KEY_FILES[name].items():
        pkg = lock.get(package)
        published = {f.filename: f.sha256 for f in pypi.release_files(package, pkg.version)}
        assert lockfile.sha256_of(wheels.uv_choice(pkg)) == published[file], package


@pytest.mark.parametrize("name", LOCKED)
def test_each_stack_runs_its_profiles_on_its_locked_versions(name):
    """A stack's profiles name it, and their runtime blocks are the lock's versions (the module
    and `serve check --stack` check flags against that SGLang's table)."""
    stack = stack_data.load(name)
    versions = stack.versions()
    assert stack.data["profiles"]
    for profile_name in stack.data["profiles"]:
        profile = load_profile(profile_name)
        assert name in profile.stacks, profile_name
        runtime = profile.data["runtime"]
        assert (runtime["sglang"], runtime["flashinfer"]) == (versions["sglang"], versions["flashinfer"]), profile_name


@pytest.mark.parametrize("name", [n for n in stack_data.names() if stack_data.load(n).kernel["from"] == "source"])
def test_the_source_built_kernel_is_kept_out_of_the_lock(name):
    stack = stack_data.load(name)
    kernel = stack.kernel
    sources = json.loads((REPO / "pkgs" / "sgl-kernel" / "sources.json").read_text())
    assert kernel["version"] == sources["sglang"]["sgl_kernel_version"]
    pyproject = tomllib.loads((stack.path / "pyproject.toml").read_text())
    assert kernel["package"] in pyproject["tool"]["uv"]["exclude-dependencies"]
    if stack.locked:
        lock = stack.lock()
        assert lock.get(kernel["package"]) is None
        assert kernel["package"] in lock.excludes


@pytest.mark.parametrize("name", [n for n in stack_data.names() if stack_data.load(n).kernel["from"] == "lock"])
def test_a_prebuilt_kernel_is_the_one_sglang_requires_and_is_paired_by_the_lock(name):
    stack = stack_data.load(name)
    kernel = stack.kernel
    assert kernel["version"] is None, "the version of a kernel from the lock is read from the lock, never typed twice"
    lock = stack.lock()
    locked = lock.get(kernel["package"])
    assert locked is not None and locked.wheels
    assert kernel["package"] in lock.get("sglang").dependencies
    assert kernel["package"] not in lock.excludes
    assert stack.torch_pairs[kernel["package"]]["check"] == "lock"


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


@pytest.mark.parametrize("name", [n for n in stack_data.names() if n != "current"])
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


def test_the_current_stack_overrides_nothing_and_says_why_for_each_requirement():
    """sglang 0.5.23's own pins resolve as they are: each line of the current stack's
    requirements states one of them, or pairs what sglang leaves open, and says which."""
    text = (REPO / "stacks" / "current" / "pyproject.toml").read_text()
    parsed = tomllib.loads(text)
    uv = parsed["tool"]["uv"]
    assert "override-dependencies" not in uv and "exclude-dependencies" not in uv
    stated = _commented_entries(text, "dependencies")
    assert set(stated) == set(parsed["project"]["dependencies"])
    for entry, comment in stated.items():
        if entry == "sglang==0.5.23":
            continue
        assert comment and ("sglang" in comment or "torch 2.14.1" in comment), (entry, comment)


@pytest.mark.parametrize(("name", "torch", "torchvision"), [("stable", "2.12.1", "0.27.1"), ("current", "2.14.1", "0.29.1")])
def test_torchvision_is_paired_by_hand(name, torch, torchvision):
    """stable: the torch override also overrides torchvision's own torch pin; current: sglang
    asks for any torchvision and torchvision 0.29 for any torch >= 2.14.0 (stable ABI)."""
    parsed = tomllib.loads((REPO / "stacks" / name / "pyproject.toml").read_text())
    deps = parsed["project"]["dependencies"]
    assert f"torchvision=={torchvision}" in deps
    assert f"torch=={torch}" in deps
    assert stack_data.load(name).lock().get("torchvision").version == torchvision


# -- lib/stacks.nix against the Python side, on the same files ---------------------------


@pytest.mark.nix
def test_nix_lists_the_same_stacks_and_default(nix):
    got = nix.eval("let s = import ./lib/stacks.nix; in { inherit (s) names default status lockedNames; "
                   "envNames = map s.envName s.names; profiles = map s.profiles s.names; }")
    assert got["names"] == stack_data.names()
    assert got["default"] == stack_data.default_name()
    assert got["lockedNames"] == LOCKED
    # The flake's package of each stack's environment, and the profiles the module and `serve --stack` offer.
    assert got["envNames"] == [stack_data.load(n).env_attribute for n in stack_data.names()]
    assert dict(zip(stack_data.names(), got["envNames"]))["current"] == "sglang-env-current"
    assert got["profiles"] == [stack_data.load(n).profiles for n in stack_data.names()]
    assert got["status"] == {n: {"locked": stack_data.load(n).locked, "command": stack_data.load(n).lock_command}
                             for n in stack_data.names()}


@pytest.mark.nix
@pytest.mark.parametrize("name", LOCKED)
def test_nix_reads_the_same_versions_from_the_lock(nix, name):
    stack = stack_data.load(name)
    assert nix.eval(f'(import ./lib/stacks.nix).versions "{name}"') == stack.versions()
    root = [p for p in stack.lock().packages.values() if p.source.get("virtual") == "."]
    assert nix.eval(f'(import ./lib/stacks.nix).rootDependencies "{name}"') == root[0].dependencies


@pytest.mark.nix
@pytest.mark.parametrize("name", [n for n in stack_data.names() if not stack_data.load(n).locked])
def test_a_stack_without_a_lock_throws_the_same_message_with_the_command(nix, name):
    stack = stack_data.load(name)
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
        stack_data.load("current-typo")
    assert "no stack 'current-typo'" in info.value.message


@pytest.mark.nix
@pytest.mark.parametrize("name", LOCKED)
def test_nix_finds_each_wheel_the_python_side_chooses(nix, name):
    """lib/stacks.nix `lockedWheel` (what nix/fixups/wheel-choice.nix fetches) finds uv's file by name."""
    stack = stack_data.load(name)
    lock = stack.lock()
    picks = {p.name: wheels.filename(wheels.uv_choice(p)) for p in lock.packages.values() if p.wheels}
    sample = {k: picks[k] for k in ("torch", "cryptography", "soundfile", "sglang")}
    expr = "let s = import ./lib/stacks.nix; in {" + "".join(
        f' "{k}" = (s.lockedWheel "{name}" "{k}" "{v}").hash;' for k, v in sample.items()) + " }"
    got = nix.eval(expr)
    for k, v in sample.items():
        wheel = next(w for w in lock.get(k).wheels if wheels.filename(w) == v)
        assert got[k] == wheel["hash"]
