"""Each garbage detector on outputs recorded from real (tiny, broken) models, and on healthy answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blackwell_stack.verify import bench, degeneracy

FIXTURES = Path(__file__).parent / "fixtures" / "verify"
RECORDED = json.loads((FIXTURES / "recorded_garbage.json").read_text())
HEALTHY = json.loads((FIXTURES / "healthy_answers.json").read_text())["answers"]


def _recorded(model: str) -> list[dict]:
    return [a for a in RECORDED["answers"] if a["model"] == model]


def _loop(seed: int) -> str:
    return next(a["text"] for a in RECORDED["loops"]["answers"] if a["seed"] == seed)


@pytest.mark.parametrize("text", HEALTHY)
def test_healthy_answers_pass_every_detector(text):
    assert degeneracy.inspect_text(text) == []


@pytest.mark.parametrize("answer", RECORDED["answers"], ids=lambda a: f"{a['model']}-{a['prompt']}-{a['mode']}")
def test_recorded_garbage_gets_its_recorded_verdicts(answer):
    checks = sorted({f.check for f in degeneracy.inspect_text(answer["text"])})
    assert checks == answer["checks"]


def test_char_run_on_the_bang_model():
    text = _recorded("bang")[0]["text"]
    finding = degeneracy.char_run(text)
    assert finding.check == "char-run"
    assert "'!' repeated 48 times" in finding.detail
    assert "!!!!" in finding.excerpt


def test_char_run_ignores_short_runs_and_whitespace():
    assert degeneracy.char_run("Wow!!! " + "=" * (degeneracy.MIN_CHAR_RUN - 1)) is None
    assert degeneracy.char_run("a" + " " * 200 + "b") is None
    assert degeneracy.char_run("x" * degeneracy.MIN_CHAR_RUN) is not None


def test_low_diversity_on_the_bang_model():
    finding = degeneracy.low_diversity(_recorded("bang")[0]["text"])
    assert finding.check == "low-diversity" and "only 1 distinct" in finding.detail


def test_low_diversity_entropy_branch():
    text = "abcdefab" * 2 + "a" * 10 + "ab" * 12  # six distinct characters, most of them rare
    finding = degeneracy.low_diversity(text)
    assert finding is not None and "entropy" in finding.detail


def test_replacement_and_control_chars_on_the_random_model():
    text = _recorded("random")[0]["text"]
    replacement = degeneracy.replacement_chars(text)
    assert replacement.check == "replacement-char" and "\ufffd" in replacement.excerpt
    control = degeneracy.control_chars(text)
    assert control.check == "control-char" and "\\x13" in control.excerpt


@pytest.mark.parametrize("seed,unit", [(0, "Waterhis$~ in"), (26, "gu")])
def test_repeated_unit_on_looping_random_models(seed, unit):
    finding = degeneracy.repeated_unit(_loop(seed))
    assert finding is not None and finding.check == "repeated-unit"
    assert unit in finding.detail or unit in finding.excerpt


def test_repeated_unit_on_a_looping_phrase_without_other_symptoms():
    text = "The capital of France is Paris. " + "Paris is Paris. " * 8
    assert [f.check for f in degeneracy.inspect_text(text)] == ["repeated-unit"]
    assert degeneracy.inspect_text(text, bench.ANSWER_DETECTORS) == []  # bench leaves it out (--ignore-eos loops)


def test_empty_content_on_the_silent_model():
    for answer in _recorded("silent"):
        findings = degeneracy.inspect_text(answer["text"])
        assert [f.check for f in findings] == ["empty-content"]
    assert degeneracy.empty_content(None).detail == "content is null"
    assert degeneracy.empty_content(" \n").detail == "content is empty or whitespace only"


@pytest.mark.parametrize("reason", ["NaN happened", "abort", None, "tool_calls"])
def test_finish_reason_other_than_stop_or_length(reason):
    finding = degeneracy.finish_reason(reason)
    assert finding is not None and finding.check == "finish-reason"


@pytest.mark.parametrize("reason", ["stop", "length"])
def test_finish_reason_stop_and_length_pass(reason):
    assert degeneracy.finish_reason(reason) is None


def test_excerpt_marks_cuts():
    text = "a" * 10 + "b" * 100
    shown = degeneracy.excerpt(text, 10, 110, width=20)
    assert shown.startswith("...'bbbb") and shown.endswith("...")
