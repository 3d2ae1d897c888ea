"""The accuracy gate: few-shot GSM8K against an OpenAI-compatible server, scored against a pass mark.

smoke catches garbage, not a server whose answers are fluent and worse (the seed's FP8 KV cache without calibrated
scales); vLLM caught a CUTLASS NVFP4 bug on SM12x only by a GSM8K score of 0.0 (vllm-project/vllm#48898). So the
gate asks grade-school maths as SGLang's own benchmark does (sglang.test.few_shot_gsm8k, benchmark/gsm8k): the
first `shots` solved examples of train, then "Question: ...\\nAnswer:" for a question of test, at temperature 0,
stopped at the next "Question"; the answer is the last number in the text, commas removed, compared with the last
number of the reference solution (after `####`). The questions are a seeded sample of test, the same for every run
with the same seed. Requests go out `concurrency` at a time; each has its own time bound and the whole run has one
too: a question not asked in time counts as wrong and makes the run incomplete, which fails it. An interrupt
(Ctrl-C, SIGTERM) ends the run at once.
"""

from __future__ import annotations

import collections
import queue
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from blackwell_stack.errors import CheckFailed
from blackwell_stack.verify import degeneracy
from blackwell_stack.verify.client import Endpoint, ServerError, get_json
from blackwell_stack.verify.gsm8k_data import Example, Threshold

# As sglang.test.few_shot_gsm8k asks: 5 shots (GateConfig), 512 new tokens, these stop strings.
STOP = ("Question", "Assistant:", "<|separator|>")
NOT_ASKED = "not asked"


@dataclass(frozen=True)
class GateConfig:
    """The gate's settings; the defaults are the command's."""

    questions: int = 200
    seed: int = 0
    shots: int = 5
    concurrency: int = 32
    max_tokens: int = 512
    timeout_s: float = 300.0  # each request
    run_timeout_s: float = 1800.0  # the whole run


@dataclass
class Graded:
    index: int  # the question's row in test.jsonl (0-based)
    expected: int | None
    got: int | None = None
    correct: bool = False
    error: str | None = None  # no answer: why (a timeout, an HTTP error, not asked)
    excerpt: str = ""
    seconds: float = 0.0


@dataclass
class GateResult:
    url: str
    model: str
    config: GateConfig
    threshold: Threshold
    dataset: dict
    graded: list[Graded] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def correct(self) -> int:
        return sum(g.correct for g in self.graded)

    @property
    def unanswered(self) -> list[Graded]:
        return [g for g in self.graded if g.error is not None]

    @property
    def accuracy(self) -> float:
        """Correct answers over every question of the subset: one without an answer counts as wrong."""
        return self.correct / len(self.graded) if self.graded else 0.0

    @property
    def reasons(self) -> list[str]:
        """Why the gate fails (none when it passes)."""
        found = []
        if self.accuracy < self.threshold.min_accuracy:
            found.append(f"accuracy {self.accuracy:.3f} is below the threshold {self.threshold.min_accuracy:g} "
                         f"({self.threshold.kind})")
        if self.unanswered:
            found.append(f"incomplete: {len(self.unanswered)} of {len(self.graded)} questions got no answer "
                         f"(first: {self.unanswered[0].error})")
        return found

    @property
    def ok(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict:
        graded = self.graded
        return {
            "check": "gsm8k", "url": self.url, "model": self.model, "ok": self.ok, "accuracy": round(self.accuracy, 4),
            "correct": self.correct, "questions": len(graded), "answered": len(graded) - len(self.unanswered),
            "invalid": sum(1 for g in graded if g.error is None and g.got is None),
            "not_asked": sum(1 for g in graded if (g.error or "").startswith(NOT_ASKED)),
            "threshold": asdict(self.threshold), "reasons": self.reasons, "seconds": round(self.seconds, 3),
            "config": asdict(self.config), "dataset": self.dataset,
            "wrong_samples": [asdict(g) for g in graded if not g.correct][:5],
        }


def answer_value(text: str) -> int | None:
    """The last number of `text`, commas removed (sglang's get_answer_value); None when it holds none."""
    numbers = re.findall(r"\d+", text.replace(",", ""))
    return int(numbers[-1]) if numbers else None


def prompt(train: list[Example], shots: int, question: str) -> str:
    solved = "".join(f"Question: {e.question}\nAnswer: {e.answer}\n\n" for e in train[:shots])
    return f"{solved}Question: {question}\nAnswer:"


def pick(count: int, questions: int, seed: int) -> list[int]:
    """A fixed sample of `questions` rows of `count` (all of them when fewer), in row order."""
    return sorted(random.Random(seed).sample(range(count), min(questions, count)))


def _completion_text(data: dict) -> str:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ServerError("protocol", f"the answer has no choices: {str(data)[:200]}")
    text = choices[0].get("text")
    if not isinstance(text, str):
        raise ServerError("protocol", f"the answer's text is not a string: {str(choices[0])[:200]}")
    return text


class _Asker:
    """Asks one question per call, bounded by its own timeout and what is left of the run's; stops asking once
    `concurrency` requests in a row got no answer in time (a stuck server costs one round, not one per question)."""

    def __init__(self, endpoint: Endpoint, model: str, config: GateConfig, deadline: float):
        self.endpoint, self.model, self.config, self.deadline = endpoint, model, config, deadline
        self.lock = threading.Lock()
        self.timeouts_in_a_row = 0
        self.stopped: str | None = None
        self.unreachable: ServerError | None = None

    def ask(self, graded: Graded, text: str) -> Graded:
        left = self.deadline - time.monotonic()
        if left <= 0 or self.stopped:
            why = "the run reached its time bound (--run-timeout)" if left <= 0 else self.stopped
            graded.error = f"{NOT_ASKED}: {why}"
            return graded
        body = {"model": self.model, "prompt": text, "temperature": 0, "max_tokens": self.config.max_tokens,
                "stop": list(STOP)}
        started = time.monotonic()
        try:
            answer = _completion_text(get_json(self.endpoint, "POST", "/completions", body,
                                               timeout=min(self.config.timeout_s, left)))
        except ServerError as exc:
            graded.error = f"{exc.kind}: {exc}"
            self._failed(exc)
            return graded
        finally:
            graded.seconds = round(time.monotonic() - started, 3)
        with self.lock:
            self.timeouts_in_a_row = 0
        graded.got = answer_value(answer)
        graded.correct = graded.got is not None and graded.got == graded.expected
        graded.excerpt = degeneracy.excerpt(answer, width=120)
        return graded

    def _failed(self, exc: ServerError) -> None:
        with self.lock:
            if exc.kind == "connect":
                self.unreachable = self.unreachable or exc
                self.stopped = f"the server could not be reached ({exc})"
            elif exc.kind == "timeout" and time.monotonic() < self.deadline:  # else the run's bound stops it
                self.timeouts_in_a_row += 1
                if self.timeouts_in_a_row >= self.config.concurrency and not self.stopped:
                    self.stopped = (f"{self.timeouts_in_a_row} requests in a row got no answer within "
                                    f"--timeout {self.config.timeout_s:g} s")


def run_gate(endpoint: Endpoint, model: str, train: list[Example], test: list[Example], config: GateConfig,
             threshold: Threshold, dataset: dict,
             on_answer: Callable[[int, int, int], None]) -> GateResult:
    """Ask the sampled questions, `concurrency` at a time; on_answer(done, correct, total) after each.

    A server that cannot be reached at all is a CheckFailed; any other failure is an unanswered question.
    """
    started = time.monotonic()
    rows = pick(len(test), config.questions, config.seed)
    asker = _Asker(endpoint, model, config, started + config.run_timeout_s)
    todo = collections.deque(rows)  # whose popleft() is thread-safe
    answers: queue.SimpleQueue[Graded | BaseException] = queue.SimpleQueue()

    def work() -> None:
        while True:
            try:
                i = todo.popleft()
            except IndexError:
                return
            try:
                question = prompt(train, config.shots, test[i].question)
                answers.put(asker.ask(Graded(i, answer_value(test[i].answer)), question))
            except BaseException as exc:  # a bug: the main thread raises it rather than wait for this answer
                answers.put(exc)
                return

    # Daemon threads: an interrupt ends the command at once, not after the requests in flight time out (which
    # a ThreadPoolExecutor would wait for, at its shutdown and again at the interpreter's exit).
    for n in range(min(config.concurrency, len(rows))):
        threading.Thread(target=work, name=f"gsm8k-{n}", daemon=True).start()
    by_row: dict[int, Graded] = {}
    correct = 0
    try:
        while len(by_row) < len(rows):
            try:
                answer = answers.get(timeout=1.0)  # a timeout, so that Ctrl-C is seen while waiting
            except queue.Empty:
                continue
            if isinstance(answer, BaseException):
                raise answer
            by_row[answer.index] = answer
            correct += answer.correct
            on_answer(len(by_row), correct, len(rows))
    finally:
        asker.stopped = asker.stopped or "the run was stopped"  # the workers ask nothing more
    result = GateResult(endpoint.base_url, model, config, threshold, dataset, [by_row[i] for i in rows],
                        time.monotonic() - started)
    if asker.unreachable is not None and not any(g.error is None for g in result.graded):
        raise CheckFailed(f"{asker.unreachable}", f"check that the server is up at {endpoint.root}, and the URL "
                          "and port")
    return result
