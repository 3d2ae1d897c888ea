"""Are bench's answers sound? Garbage, abnormal finish reasons and answers cut short.

A throughput figure means nothing if the answers were garbage: the seed
deployment streamed runs of `!` and ended answers with "NaN happened" at full
speed (docs/reference-deployment.md#failures-and-fixes). Every bench answer
is judged after its level, outside the measured time, with the smoke test's
checks: the deployment's own failure text (failure_text.py) in the text, the
finish reason or matched_stop, and the detectors of degeneracy.py minus one: `repeated-unit`, because greedy decoding
past the end of text (`--ignore-eos`) loops on a phrase even on a healthy
model, and bench prompts are word salad.

An answer that stops before its max_tokens is not broken, but it makes the
figures those of shorter answers than asked: bench reports how many did.
"""

from __future__ import annotations

from dataclasses import dataclass

from blackwell_stack.verify import degeneracy, failure_text

TEXT_DETECTORS = (
    degeneracy.replacement_chars,
    degeneracy.control_chars,
    degeneracy.char_run,
    degeneracy.low_diversity,
)


@dataclass(frozen=True)
class Judgement:
    findings: tuple[degeneracy.Finding, ...]
    early_stop: bool

    @property
    def broken(self) -> bool:
        return bool(self.findings)


def judge(text: str | None, finish_reason: object, completion_tokens: int | None, max_tokens: int | None,
          matched_stop: object = None) -> Judgement:
    """The findings on one answer, and whether it ended before max_tokens."""
    findings: list[degeneracy.Finding] = failure_text.find(text, finish_reason, matched_stop)
    reason = degeneracy.finish_reason(finish_reason)
    if reason:
        findings.append(reason)
    empty = degeneracy.empty_content(text)
    if empty:
        findings.append(empty)
    elif text is not None:
        findings.extend(f for f in (detector(text) for detector in TEXT_DETECTORS) if f)
    early = completion_tokens is not None and max_tokens is not None and completion_tokens < max_tokens
    return Judgement(tuple(findings), early)
