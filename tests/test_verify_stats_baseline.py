"""Percentiles, baselines (the shipped default and bad files), and the plan section."""

from __future__ import annotations

import json

import pytest

from blackwell_stack.errors import DataError
from blackwell_stack.verify import baseline, plan, stats


def test_percentile_interpolates_like_numpy():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert stats.percentile(values, 50) == 5.5
    assert stats.percentile(values, 90) == pytest.approx(9.1)
    assert stats.percentile(values, 99) == pytest.approx(9.91)
    assert stats.percentile([3.0], 99) == 3.0
    assert stats.percentile([], 50) is None
    assert stats.summary([]) == {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None}


def test_default_baseline_holds_the_seeds_figures():
    base = baseline.load(baseline.DEFAULT_BASELINE)
    by_metric = {e.metric: e for e in base.expectations}
    assert by_metric["decode_tok_s.p50"].value == 172 and by_metric["decode_tok_s.p50"].concurrency == 1
    assert by_metric["output_tok_s"].value == 2100 and by_metric["output_tok_s"].relation == "at_least"
    assert base.matches_model("Qwen/Qwen3.5-397B-A17B-NVFP4")
    assert base.matches_model("nvidia/Qwen3.5-397B-A17B-NVFP4")
    assert base.matches_model("/models/qwen3.5-397b-a17b-nvfp4/")
    assert not base.matches_model("Qwen/Qwen3-0.6B")


def _level(c, tok_s, decode_p50):
    return {"concurrency": c, "output_tok_s": tok_s, "decode_tok_s": {"p50": decode_p50}}


def test_compare_statuses():
    base = baseline.load(baseline.DEFAULT_BASELINE)
    rows = baseline.compare(base, [_level(1, 170, 171.0), _level(32, 1500, 60.0), _level(64, 2300, 40.0)])
    single, high = rows
    assert single["status"] == "ok" and single["measured"] == 171.0
    assert high["status"] == "ok" and high["at_concurrency"] == 64 and high["measured"] == 2300
    rows = baseline.compare(base, [_level(1, 70, 72.0), _level(128, 900, 10.0)])
    assert [r["status"] for r in rows] == ["below", "below"]
    rows = baseline.compare(base, [_level(8, 900, 100.0)])
    assert [r["status"] for r in rows] == ["not measured", "not measured"]


@pytest.mark.parametrize(
    "data,field",
    [
        ({"target": "t", "model": "m", "source": "s"}, "expectations"),
        ({"target": "t", "model": "m", "source": "s", "tolerance": 2, "expectations": []}, "tolerance"),
        (
            {"target": "t", "model": "m", "source": "s", "expectations": [{"name": "x", "metric": "output_tok_s", "value": 1, "relation": "near", "concurrency": 1}]},
            "relation",
        ),
        (
            {"target": "t", "model": "m", "source": "s", "expectations": [{"name": "x", "metric": "output_tok_s", "value": -1, "relation": "about", "concurrency": 1}]},
            "value",
        ),
    ],
)
def test_bad_baseline_names_the_field(tmp_path, data, field):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        baseline.load(path)
    assert err.value.field == field and str(path) in str(err.value)


def test_missing_baseline_file(tmp_path):
    with pytest.raises(DataError) as err:
        baseline.load(tmp_path / "none.json")
    assert "--baseline none" in err.value.hint


def test_plan_section_names_the_default_target():
    section = plan.plan_section()
    assert section.key == "verify"
    smoke, bench = section.commands
    assert smoke.startswith("blackwell-stack smoke http://127.0.0.1:30000 --model ")
    assert "bench http://127.0.0.1:30000" in bench and "--concurrency 1,8,32,64,128" in bench
    model = next(i.value for i in section.items if i.name == "model")
    assert model.endswith("Qwen3.5-397B-A17B-NVFP4")


@pytest.mark.proc
def test_smoke_module_parses(nix, repo):
    import subprocess

    result = subprocess.run(
        [nix.binary, "--parse", str(repo / "modules" / "sglang-smoke.nix")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
