"""The reference wheel (pkgs/sgl-kernel/reference-wheel.json): current with the repository, and the verdicts.

`pytest -k reference` selects these. The first tests fail, naming the value
and the file, as soon as a recorded input (a patch, the recipe, a pin, the
record's wording) differs from the repository: the reference can no longer go
stale silently. The verdicts are checked on real wheels from a real
scikit-build-core build of a tiny project shaped like sgl-kernel.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, copy_data_root
from support.cli import run as cli
from support.kernel_probe import probe_plan, probe_project

from blackwell_stack.data import registry
from blackwell_stack.hashes import sha256_file
from blackwell_stack.kernel.build import execute
from blackwell_stack.kernel.reproducibility import buildinfo, reference
from blackwell_stack.kernel.reproducibility.conditions import CONDITIONS

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

# -- the file: the measured reference, the withdrawn one, and a file with none ------------------

def test_reference_file_is_what_its_script_writes():
    script = REPO / "benchmarks" / "kernel-reproducibility" / "make_reference.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_measured_reference_is_the_lock_configuration_and_lists_the_withdrawn_ones():
    doc = reference.document()
    assert doc.current is not None and doc.current.arch == "12.0a" and reference.stale_inputs() == []
    record = doc.current.build_record
    assert record["torch"]["override"] is None and record["torch"]["source"] == "stacks/stable/uv.lock"
    assert not any(p["accepted_mismatch"] for p in record["sources"]["pins"].values())
    assert "--allow-source-mismatch" not in doc.current.command and "--allow-torch" not in doc.current.command
    assert doc.current.wheel_sha256.startswith("5911bbbd") and doc.current.conditions["c++"].startswith("gcc 13.3.0 (/usr/bin/g++")
    assert [w["sha256"][:8] for w in doc.withdrawn] == ["a0e6a8d7", "51b2e673"]
    assert "torch 2.11.0+cu130" in doc.withdrawn[0]["why"] and "static libstdc++" in doc.withdrawn[1]["why"]
    result = cli("kernel", "reference")
    assert result.returncode == 0, result.stderr
    assert "current: every recorded input" in result.stdout and "5911bbbd" in result.stdout
    assert json.loads(cli("kernel", "reference", "--json").stdout)["current"] is True


def test_the_reference_wheel_holds_the_real_triton_kernels_package():
    data = json.loads((REPO / "pkgs" / "sgl-kernel" / "reference-wheel.json").read_text())
    members = data["current"]["result"]["members"]
    kernels = sorted(m for m in members if m.startswith("triton_kernels/"))
    assert len(kernels) == 40 and not any("PLACEHOLDER" in m for m in members)
    # sgl-kernel 0.3.21's PyPI wheel RECORD has this sha256 for the file (the repo-triton pin's filtered tree)
    assert members["triton_kernels/matmul_ogs.py"] == "56061a61a2d018245b4a6ee3e41ff79d9f6cf089ffc072d1ca95fb5ded1da4a2"


def test_without_a_current_reference_it_says_how_to_record_one(tmp_path):
    root = copy_data_root(tmp_path / "root")
    path = _write(root, None)
    data = json.loads(path.read_text())
    data["current_reason"] = "withdrawn, none measured since"
    path.write_text(json.dumps(data))
    result = cli("kernel", "reference", root=root)
    assert result.returncode == 0, result.stderr
    assert "none for the repository's recipe" in result.stdout and "51b2e673" in result.stdout
    assert "to record one" in result.stdout
    assert json.loads(cli("kernel", "reference", "--json", root=root).stdout)["withdrawn"][0]["arch"] == "12.0a"
    refused = cli("wheel", "diff", "--reference", str(REPO / "README.md"), root=root)
    assert refused.returncode == 2 and "no reference wheel is recorded" in refused.stderr


def _current(record: dict, conditions: dict | None = None, result: dict | None = None) -> dict:
    """A `current` entry as a measured reference records it."""
    text = buildinfo.dumps(record)
    members = {reference.BUILD_RECORD_MEMBER: hashlib.sha256(text.encode()).hexdigest()}
    return {
        "configuration": {"command": "blackwell-stack kernel build ...",
                          "conditions": conditions or {c: f"the {c} measured" for c in CONDITIONS},
                          "build_record": record},
        "result": result or {"wheel": {"name": "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl", "sha256": "0" * 64,
                                       "size": 1}, "members": members, "compiled": {}},
    }


def _write(root: Path, current: dict | None) -> Path:
    path = root / registry.entry("reference-wheel").pattern
    data = json.loads(path.read_text())
    data["current"] = current
    path.write_text(json.dumps(data, indent=2))
    return path


def _repository_record() -> dict:
    """The build record the repository writes today for a 12.0a build from checked sources."""
    draft = reference.Reference(Path("x"), {"cuda_archs": "12.0a", "torch": {"built_against": "2.12.1+cu130"},
                                            "sources": {"from": "directory (--sources), checked by NAR hash"}},
                                {}, "", "w", "0" * 64, 1, {}, {})
    return reference.expected_record(draft)


def _edit_patch(root: Path) -> str:
    path = sorted((root / "patches" / "sgl-kernel").glob("0005-*.patch"))[0]
    path.write_text("A reworded header line.\n" + path.read_text())
    return f"patches/sgl-kernel/{path.name}"


def _edit_recipe(root: Path) -> str:
    path = root / "pkgs" / "sgl-kernel" / "recipe.json"
    data = json.loads(path.read_text())
    data["environment"]["SOURCE_DATE_EPOCH"] = "315532801"
    path.write_text(json.dumps(data, indent=2))
    return "pkgs/sgl-kernel/recipe.json"


def _edit_pin(root: Path) -> str:
    path = root / "pkgs" / "sgl-kernel" / "sources.json"
    data = json.loads(path.read_text())
    data["fetchcontent"]["repo-fmt"]["rev"] = "0" * 40
    path.write_text(json.dumps(data, indent=2))
    return "pkgs/sgl-kernel/sources.json"


@pytest.mark.parametrize("edit", [_edit_patch, _edit_recipe, _edit_pin], ids=["patch", "recipe", "pin"])
def test_a_current_reference_goes_stale_when_an_input_changes(tmp_path, edit):
    root = copy_data_root(tmp_path / "root")
    _write(root, _current(_repository_record()))
    current = cli("kernel", "reference", root=root)
    assert current.returncode == 0 and "current: every recorded input" in current.stdout, current.stderr
    owner = edit(root)
    result = cli("kernel", "reference", "--json", root=root)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert not data["current"] and any(owner in c["owner"] for c in data["changed_inputs"]), data["changed_inputs"]
    human = cli("kernel", "reference", root=root)
    assert human.returncode == 1 and "measure the wheel again" in human.stderr and owner in human.stderr


@pytest.mark.parametrize("damage", [
    lambda d: d["current"].pop("result"),
    lambda d: d["current"]["result"]["members"].update({"sgl_kernel/_build_info.json": "not-a-hash"}),
    lambda d: d["current"]["configuration"]["conditions"].pop("nvcc"),
    lambda d: d.pop("withdrawn"),
], ids=["no-result", "bad-hash", "no-condition", "no-withdrawn"])
def test_malformed_reference_is_bad_data_naming_the_field(tmp_path, damage):
    root = copy_data_root(tmp_path / "root")
    path = _write(root, _current(_repository_record()))
    data = json.loads(path.read_text())
    damage(data)
    path.write_text(json.dumps(data))
    result = cli("kernel", "reference", root=root)
    assert result.returncode == 3 and "reference-wheel.json" in result.stderr and "field" in result.stderr
    assert "Traceback" not in result.stderr


# -- the configuration verdict -----------------------------------------------------------------

def test_reference_configuration_verdicts(tmp_path):
    root = copy_data_root(tmp_path / "root")
    ref = reference.load(_write(root, _current(_repository_record())))
    assert ref is not None
    same = reference.compare_configuration(ref, ref.build_record, ref.conditions)
    assert same.same and "this is the reference configuration" in same.summary()
    moved = reference.compare_configuration(ref, ref.build_record, {**ref.conditions, "stage": "/elsewhere"})
    assert moved.same_record and not moved.same and "stage" in moved.summary()
    other = copy.deepcopy(ref.build_record)
    other["cmake_defines"]["SGL_KERNEL_CUDA_ARCHS"] = "10.0a"
    differs = reference.compare_configuration(ref, other, ref.conditions)
    assert not differs.same_record and "no reference wheel exists for these inputs" in differs.summary()
    assert [d.what for d in differs.record] == ["cmake_defines.SGL_KERNEL_CUDA_ARCHS"]
    assert "recipe.json" in differs.record[0].owner


def test_the_dry_run_plan_compares_with_the_reference_and_records_its_conditions(tmp_path):
    tree = tmp_path / "sglang" / "sgl-kernel"
    (tree / "python" / "sgl_kernel").mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("project(sgl-kernel)\n")
    (tree / "pyproject.toml").write_text('[project]\nname = "sgl-kernel"\nversion = "0.3.21"\n')
    result = cli("kernel", "build", "--src", str(tmp_path / "sglang"), "--dry-run", "--json", "--out", str(tmp_path / "d"))
    plan = json.loads(result.stdout)
    if reference.document().current is None:
        assert plan["reference"] is None  # nothing to compare with: `kernel reference` says why
    else:
        assert plan["reference"]["same_configuration"] is False  # downloaded sources: other inputs
        assert any(d["what"] == "sources.from" for d in plan["reference"]["input_differences"])
    assert set(plan["conditions"]) == set(CONDITIONS)
    assert plan["conditions"]["stage"] == "/tmp/blackwell-stack-sgl-kernel"


# -- the wheel verdict, on real builds ---------------------------------------------------------

def _build(tmp_path: Path, name: str, c_source: str, record: str) -> Path:
    kdir = probe_project(tmp_path / name, c_source)
    return execute.run_build(probe_plan(kdir, tmp_path / name / "dist", record), stream=open(os.devnull, "w"))


def _reference_for(wheel: Path, record: str, root: Path) -> reference.Reference:
    """A reference file that records `wheel` as measured (in a copy of the data root)."""
    with zipfile.ZipFile(wheel) as zf:
        members = {i.filename: hashlib.sha256(zf.read(i)).hexdigest() for i in zf.infolist()
                   if not i.is_dir() and not i.filename.endswith(".dist-info/RECORD")}
        sizes = {i.filename: i.file_size for i in zf.infolist()}
    result = {"wheel": {"name": wheel.name, "sha256": sha256_file(wheel), "size": wheel.stat().st_size},
              "members": members,
              "compiled": {"sgl_kernel/libprobe.so": {"sha256": members["sgl_kernel/libprobe.so"],
                                                      "size": sizes["sgl_kernel/libprobe.so"]}}}
    ref = reference.load(_write(root, _current(json.loads(record), result=result)))
    assert ref is not None
    return ref


@pytest.mark.slow
def test_reference_wheel_verdicts_on_real_builds(tmp_path):
    record = buildinfo.dumps({"torch": {"override": None}, "patches": [{"name": "0001-x", "sha256": "0" * 64}]})
    source = "int probe(void) { return 120; }\n"
    first = _build(tmp_path, "a", source, record)
    root = copy_data_root(tmp_path / "root")
    ref = _reference_for(first, record, root)

    again = _build(tmp_path, "b", source, record)  # another directory, the same inputs
    same = reference.compare_wheel(ref, again)
    assert same.identical and same.kind == "identical" and "bit for bit" in same.summary()

    other_record = record.replace("0" * 64, "1" * 64)
    relabelled = reference.compare_wheel(ref, _build(tmp_path, "c", source, other_record))
    assert relabelled.kind == "build-record" and "only the build record differs" in relabelled.summary()
    assert "patches[0001-x].sha256" in relabelled.summary()

    recompiled = reference.compare_wheel(ref, _build(tmp_path, "d", "int probe(void) { return 121; }\n", record))
    assert recompiled.kind == "compiled-code" and "sgl_kernel/libprobe.so" in recompiled.summary()

    repacked = tmp_path / "repacked" / first.name
    repacked.parent.mkdir()
    with zipfile.ZipFile(first) as zin, zipfile.ZipFile(repacked, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in reversed(zin.infolist()):  # the same members, stored in another order
            zout.writestr(info.filename, zin.read(info))
    assert reference.compare_wheel(ref, repacked).kind == "zip-metadata"

    # The CLI: `wheel diff --reference`, exit 0 only for the reference wheel itself.
    ok = cli("wheel", "diff", "--reference", str(again), root=root)
    assert ok.returncode == 0 and "reproduced the reference wheel bit for bit" in ok.stdout, ok.stderr
    bad = cli("wheel", "diff", "--reference", str(recompiled.wheel), "--json", root=root)
    assert bad.returncode == 1 and json.loads(bad.stdout)["verdict"] == "compiled-code"
    both = cli("wheel", "diff", "--reference", str(again), str(first), root=root)
    assert both.returncode == 2 and "pass one wheel" in both.stderr


def test_wheel_diff_needs_two_wheels_without_reference(tmp_path):
    result = cli("wheel", "diff", str(tmp_path / "a.whl"))
    assert result.returncode == 2 and "--reference" in result.stderr and "Traceback" not in result.stderr


def test_kernel_reference_runs_no_program():
    """`kernel reference` reads one JSON file: no build tools run."""
    result = cli("-v", "kernel", "reference")
    assert result.returncode == 0 and "$ " not in result.stderr
