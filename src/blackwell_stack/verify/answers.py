"""Are bench's answers sound? Garbage in the text of each.

A throughput figure means nothing if the answers were garbage: the seed
deployment streamed runs of `!` and ended answers with "NaN happened" at full
speed (docs/reference-deployment.md#failures-and-fixes). Every bench answer
is judged after its level, outside the measured time, with the smoke test's
checks: the deployment's own failure text (failure_text.py) and the detectors
of degeneracy.py minus one: `repeated-unit`, because greedy decoding past the
end of text (`--ignore-eos`) loops on a phrase even on a healthy model, and
bench prompts are random tokens. bench_serving keeps only the text of an
answer, not its finish reason (smoke checks that).
"""

from __future__ import annotations

from blackwell_stack.verify import degeneracy, failure_text

TEXT_DETECTORS = (
    degeneracy.replacement_chars,
    degeneracy.control_chars,
    degeneracy.char_run,
    degeneracy.low_diversity,
)


def judge(text: str | None) -> list[degeneracy.Finding]:
    """The findings on one answer's text: none for a sound one."""
    findings: list[degeneracy.Finding] = failure_text.find(text)
    empty = degeneracy.empty_content(text)
    if empty:
        return [*findings, empty]
    assert text is not None
    return findings + [f for f in (detector(text) for detector in TEXT_DETECTORS) if f]
