"""The stacks through the CLI: `plan stack-NAME`, `plan --stack`, `pins vendor` of a
locked file, and the refusals for a stack without a lock."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from blackwell_stack.cli import main
from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.download import download
from blackwell_stack.errors import StackError
from blackwell_stack.kernel.build import toolchain


@pytest.mark.proc
def test_plan_stack_name_is_that_stacks_section_whichever_is_the_default(capsys):
    for name, versions in (("stable", {"sglang": "0.5.9", "flashinfer": "0.6.5", "torch": "2.12.1"}),
                           ("current", {"sglang": "0.5.23", "flashinfer": "0.7.2", "torch": "2.14.1"})):
        assert main(["plan", f"stack-{name}", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert list(plan["sections"]) == [f"stack-{name}"] and plan["stacks"][name]["versions"] == versions
    assert main(["plan", "stack-nightly", "--json"]) == 0
    section = json.loads(capsys.readouterr().out)["sections"]["stack-nightly"]
    lock = {i["name"]: i for i in section["items"]}["uv.lock"]
    assert not lock["verified"] and "Make it with: blackwell-stack stack lock nightly --wheels DIR" in lock["note"]


@pytest.mark.proc
@pytest.mark.parametrize("name", ["stable", "current"])
def test_plan_for_a_locked_stack_has_every_pin_verified_with_its_source(capsys, name):
    assert main(["plan", "--stack", name, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    section = plan["sections"][f"stack-{name}"]
    lock = stack_data.load(name).lock()
    files = [i for i in section["items"] if " " in i["name"] and i["value"].endswith(".whl")]
    assert len(files) == len([p for p in lock.packages.values() if p.wheels])
    for item in section["items"]:
        assert item["verified"], item
        assert item["source"], item
    for item in files:
        assert "PyPI's registry sha256, recorded by uv 0.10.7" in item["source"]
        assert "downloaded from its URL in uv.lock and hashed on" in item["source"]
    assert not [u for u in plan["unverified"] if u["section"] in ("pins", f"stack-{name}")]
    assert f"nix build .#{stack_data.load(name).env_attribute}" in section["commands"]
    # The service section follows the stack: its first profile on its lock's versions.
    runtime = {i["name"]: i for i in plan["sections"]["service"]["items"]}["runtime"]
    versions = stack_data.load(name).versions()
    assert runtime["value"] == f"sglang {versions['sglang']}, flashinfer {versions['flashinfer']}"


def test_the_current_stacks_kernel_is_the_locked_wheel_checked_against_the_locked_torch(capsys):
    assert main(["plan", "--stack", "current", "--json"]) == 0
    items = {i["name"]: i for i in json.loads(capsys.readouterr().out)["sections"]["stack-current"]["items"]}
    kernel = items["sglang-kernel"]
    assert kernel["value"].startswith("0.4.10 from lock") and kernel["verified"]
    assert "122 of 122 torch symbols resolve in torch 2.14.1" in kernel["source"]
    assert items["sglang-kernel 0.4.10"]["value"] == "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl"


@pytest.mark.proc
def test_plan_for_the_nightly_says_what_is_missing_and_what_fills_it(capsys):
    assert main(["plan", "--stack", "nightly", "--json"]) == 0
    section = json.loads(capsys.readouterr().out)["sections"]["stack-nightly"]
    missing = {i["name"]: i["note"] for i in section["items"] if not i["verified"]}
    assert set(missing) == {"uv.lock"}
    assert missing["uv.lock"].endswith("Make it with: blackwell-stack stack lock nightly --wheels DIR")
    assert section["commands"][0] == "blackwell-stack stack lock nightly --wheels DIR"


def test_plan_refuses_an_unknown_stack(capsys):
    assert main(["plan", "--stack", "current-typo"]) == 2
    assert "hint: pick one of:" in capsys.readouterr().err


def test_the_kernel_toolchain_check_takes_the_stacks_torch():
    """`kernel build --stack NAME` expects the torch of that stack's lock; a stack without one names its lock command."""
    expected = toolchain.expected_torch(sys.executable, stack_data.load("stable"))
    assert expected.version == stack_data.load("stable").versions()["torch"] and expected.override is None
    assert expected.install.startswith("UV_PROJECT_ENVIRONMENT=") and "uv sync --frozen --inexact --project" in expected.install
    with pytest.raises(StackError) as info:
        toolchain.expected_torch(sys.executable, stack_data.load("nightly"))
    assert info.value.hint == "run `blackwell-stack stack lock nightly --wheels DIR`"


def test_kernel_build_refuses_a_stack_whose_kernel_comes_from_its_lock(capsys, tmp_path):
    assert main(["kernel", "build", "--stack", "current", "--src", str(tmp_path), "--out", str(tmp_path / "dist")]) == 2
    err = capsys.readouterr().err
    assert "the current stack builds no kernel: it takes sglang-kernel from its lock" in err
    assert "uv sync --frozen" in err and "Traceback" not in err
    assert not (tmp_path / "dist").exists()


@pytest.mark.nix
@pytest.mark.network
def test_vendor_checks_a_file_against_the_lock_and_adds_it_where_fetchurl_looks(tmp_path, capsys):
    if shutil.which("nix-store") is None:
        pytest.skip("nix-store is not installed (apt-get install nix-bin)")
    lock = stack_data.load("stable").lock()
    # A file only the stable lock names (the other locks take another python-dateutil).
    wheel = wheels.uv_choice(lock.get("python-dateutil"))
    name, digest = wheels.filename(wheel), lockfile.sha256_of(wheel)
    kept = tmp_path / name
    download(wheel["url"], kept, expected_sha256=digest)
    assert main(["pins", "vendor", str(kept)]) == 0
    out = capsys.readouterr().out
    expected = subprocess.run(["nix-store", "--print-fixed-path", "sha256", digest, name], capture_output=True,
                              text=True, check=True).stdout.strip()
    assert expected in out and "stacks/stable/uv.lock" in out
    tampered = tmp_path / "other" / name
    tampered.parent.mkdir()
    tampered.write_bytes(kept.read_bytes() + b"\0")
    assert main(["pins", "vendor", str(tampered)]) == 5
    assert "nothing was added to the store" in capsys.readouterr().err
