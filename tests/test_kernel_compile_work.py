"""benchmarks/kernel-compile-work/compile_work.py: device compilations of upstream's defaults against the recipe."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import scripts

from blackwell_stack.errors import DataError

compile_work = scripts.load("benchmarks/kernel-compile-work/compile_work.py")
SCRIPT = compile_work.__file__


def make_tree(root, texts):
    kdir = root / "sglang" / "sgl-kernel"
    (kdir / "python" / "sgl_kernel").mkdir(parents=True)
    for rel, text in texts.items():
        (kdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (kdir / rel).write_text(text)
    (kdir / "pyproject.toml").write_text('[project]\nname = "sgl-kernel"\nversion = "0.3.21"\n')
    return root / "sglang"


@pytest.mark.proc
def test_the_recipe_meets_the_one_eighth_goal():
    result = subprocess.run([sys.executable, str(SCRIPT), "--json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["meets_goal"] and data["ratio"] <= 1 / 8
    assert data["recipe_total"] > 0 and "compile-units.json" in data["sources"]
    common = {t["target"]: t for t in data["upstream"]}["common_ops"]
    assert common["variants"] == ["sm90", "sm100"] and len(common["archs"]) == 7


def test_a_checkouts_cmake_lists_give_the_recorded_counts(tmp_path):
    units = compile_work.load_data()["targets"]
    cmake = "\n".join(
        f"set({var}\n" + "\n".join(f'    "{s}"' for s in units[target]["sources"]) + "\n)"
        for target, (rel, var) in compile_work.SOURCE_VARIABLES.items()
        if rel == "CMakeLists.txt"
    )
    flashmla = 'set(FlashMLA_SOURCES\n' + "\n".join(f"    {s}" for s in units["flashmla_ops"]["sources"]) + "\n)\n"
    tree = make_tree(tmp_path, {"CMakeLists.txt": cmake + "\n", "cmake/flashmla.cmake": flashmla})
    from_src, recorded = compile_work.compare(tree), compile_work.compare()
    assert from_src.upstream_total == recorded.upstream_total
    assert from_src.recipe_total == recorded.recipe_total
    assert "parsed from" in from_src.source_note


def test_a_wrong_shape_names_the_entry_and_field(tmp_path):
    data = json.loads(compile_work.UNITS.read_text())
    path = tmp_path / "compile-units.json"
    path.write_text(json.dumps({**data, "targets": {"common_ops": {"sources": "x.cu"}}}))
    with pytest.raises(DataError, match=r"entry 'targets.common_ops', field 'sources'"):
        compile_work.load_data(path)
