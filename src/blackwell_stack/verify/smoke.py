"""`smoke`: fixed prompts at temperature 0, streamed and not, judged for garbage and for their content.

Every prompt goes to its endpoint twice (stream and no stream); a verdict is one failed check on one answer. Garbage
(degeneracy.py) is not enough to pass: a server that gives one sentence to every prompt, or fluent wrong answers, is
as broken, so the answers must also hold what any working model writes at temperature 0 (the capital of France, the
digits of a count), and different prompts must get different answers. Reasoning models (Qwen3.5 thinks by default)
may put their text in `reasoning_content`: it is judged too, and an answer is empty only when both fields are.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from blackwell_stack.errors import CheckFailed
from blackwell_stack.verify import degeneracy
from blackwell_stack.verify.client import Endpoint, ServerError, get_json, stream_events


@dataclass(frozen=True)
class Prompt:
    name: str
    api: str  # "chat" or "completion"
    text: str
    expect: str | None = None  # a regular expression the answer must hold (case-insensitive)
    expect_what: str = ""


_COUNT = r"\b1\D{1,8}2\D{1,8}3\D{1,8}4\D{1,8}5\D{1,8}6\b"
PROMPTS = (
    Prompt("capital", "chat", "What is the capital of France? Answer in one sentence.", r"\bParis\b", "Paris"),
    Prompt("count", "chat", "Count from 1 to 12 in digits, separated by commas.", _COUNT, "the digits 1 to 6 in order"),
    Prompt("story", "completion", "Once upon a time, in a small village by the sea, there lived"),
    Prompt("facts", "completion", "Water boils at 100 degrees Celsius at sea level. The chemical formula of water is"),
)

DEFAULT_MAX_TOKENS = 128
DEFAULT_TIMEOUT_S = 300.0
NO_ANSWER = "no answer within --timeout"


@dataclass
class Verdict:
    prompt: str
    mode: str  # "stream" or "no-stream"
    check: str
    detail: str
    excerpt: str


@dataclass
class Answer:
    prompt: str
    api: str
    mode: str
    text: str | None = None
    finish_reason: str | None = None
    matched_stop: str | None = None  # SGLang's stop string ("NaN happened" when a step produced NaN)
    completion_tokens: int | None = None
    seconds: float = 0.0
    verdicts: list[Verdict] = field(default_factory=list)


@dataclass
class SmokeReport:
    url: str
    model: str
    answers: list[Answer]

    @property
    def verdicts(self) -> list[Verdict]:
        return [v for a in self.answers for v in a.verdicts]

    @property
    def ok(self) -> bool:
        return not self.verdicts

    def to_json(self) -> dict:
        return {"url": self.url, "model": self.model, "ok": self.ok, "answers": [asdict(a) for a in self.answers],
                "verdicts": [asdict(v) for v in self.verdicts]}


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ServerError("protocol", f"answer text is not a string: {str(value)[:120]}")


def _read_events(answer: Answer, events: list[dict], chat: bool, part_name: str) -> None:
    """The answer's text, finish reason, matched_stop and tokens from its events: the first choice of each, its
    `message` (an answer) or `delta` (a stream event), or the choice itself for completions (`text`)."""
    content: list[str] = []
    reasoning: list[str] = []
    for event in events:
        if "error" in event:
            raise ServerError("protocol", f"error event in the answer: {str(event['error'])[:200]}")
        choices = event.get("choices") or []
        if not isinstance(choices, list):
            raise ServerError("protocol", f"choices is not a list: {str(event)[:120]}")
        for choice in choices[:1]:
            if not isinstance(choice, dict):
                raise ServerError("protocol", f"a choice is not an object: {str(choice)[:120]}")
            part = choice.get(part_name) if chat else choice
            if not isinstance(part, dict):
                raise ServerError("protocol", f"choice has no {part_name} object: {str(choice)[:120]}")
            text = _text(part.get("content") if chat else part.get("text"))
            thought = _text(part.get("reasoning_content") or part.get("reasoning")) if chat else None
            if text is not None:
                content.append(text)
            if thought:
                reasoning.append(thought)
            if choice.get("finish_reason") is not None:
                answer.finish_reason = choice["finish_reason"]
            if choice.get("matched_stop") is not None:
                answer.matched_stop = choice["matched_stop"]
        usage = event.get("usage")
        tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        if isinstance(tokens, int):
            answer.completion_tokens = tokens
    if content or reasoning:
        answer.text = "".join(reasoning) + "".join(content)


def _ask(endpoint: Endpoint, model: str, prompt: Prompt, mode: str, max_tokens: int, timeout: float) -> Answer:
    answer = Answer(prompt=prompt.name, api=prompt.api, mode=mode)
    chat = prompt.api == "chat"
    body: dict = {"model": model, "temperature": 0, "max_tokens": max_tokens}
    body.update({"messages": [{"role": "user", "content": prompt.text}]} if chat else {"prompt": prompt.text})
    path = "/chat/completions" if chat else "/completions"
    started = time.monotonic()
    events: list[dict] = []
    try:
        if mode == "stream":
            body.update(stream=True, stream_options={"include_usage": True})
            stream_events(endpoint, path, body, timeout=timeout, into=events)
            _read_events(answer, events, chat, "delta")
        else:
            data = get_json(endpoint, "POST", path, body, timeout=timeout)
            if not isinstance(data.get("choices"), list) or not data["choices"]:
                raise ServerError("protocol", f"the answer has no choices: {str(data)[:200]}")
            _read_events(answer, [data], chat, "message")
    except ServerError as exc:
        if exc.kind == "connect":
            raise CheckFailed(f"{exc}", f"check that the server is up at {endpoint.root} (for the NixOS unit: "
                              "systemctl status sglang; journalctl -u sglang), and the URL and port") from None
        answer.verdicts.append(_failed(prompt, mode, exc, events, chat))
        return answer
    finally:
        answer.seconds = round(time.monotonic() - started, 3)
    reason = degeneracy.finish_reason(answer.finish_reason)
    findings = degeneracy.failure_text(answer.text, answer.finish_reason, answer.matched_stop) + ([reason] if reason else [])
    findings += degeneracy.inspect_text(answer.text)
    answer.verdicts.extend(Verdict(prompt.name, mode, f.check, f.detail, f.excerpt) for f in findings)
    if not answer.verdicts and prompt.expect and not re.search(prompt.expect, answer.text or "", re.IGNORECASE):
        answer.verdicts.append(Verdict(prompt.name, mode, "wrong-answer", f"the answer does not hold "
                                       f"{prompt.expect_what}", degeneracy.excerpt(answer.text or "")))
    return answer


def _failed(prompt: Prompt, mode: str, exc: ServerError, events: list[dict], chat: bool) -> Verdict:
    if exc.kind == "dropped":
        so_far = Answer(prompt.name, prompt.api, mode)
        with contextlib.suppress(ServerError):
            _read_events(so_far, events, chat, "delta")
        shown = degeneracy.excerpt(so_far.text, width=60) if so_far.text else "-"
        return Verdict(prompt.name, mode, "dropped", f"the server closed the connection before the answer "
                       f"ended: {exc}", f"text so far: {shown}")
    if exc.kind == "timeout":
        return Verdict(prompt.name, mode, "http", NO_ANSWER, str(exc))
    if exc.kind == "http":
        return Verdict(prompt.name, mode, "http", f"HTTP status {exc.status}", str(exc)[:200])
    return Verdict(prompt.name, mode, "protocol", "answer is not valid OpenAI JSON/SSE", str(exc)[:200])


def _same_answers(answers: list[Answer]) -> None:
    """A verdict on each answer whose text another prompt got too (in the same mode): the server is not
    answering the prompt."""
    by_text: dict[tuple[str, str], list[Answer]] = {}
    for a in answers:
        if a.text and all(v.check == "wrong-answer" for v in a.verdicts):
            by_text.setdefault((a.mode, " ".join(a.text.split()).lower()), []).append(a)
    for group in by_text.values():
        if len(group) > 1:
            names = ", ".join(a.prompt for a in group)
            for a in group:
                a.verdicts.append(Verdict(a.prompt, a.mode, "same-answer", f"the prompts {names} got the same "
                                          "answer", degeneracy.excerpt(a.text or "")))


def run_smoke(endpoint: Endpoint, model: str, *, max_tokens: int, timeout: float,
              on_step: Callable[[str, Answer | None], None]) -> SmokeReport:
    """Ask every prompt not streamed and streamed, one request at a time (a smoke test, not a load).

    A request that gets no answer within `timeout` ends the asking: the rest
    are verdicts of their own ("not-asked"), so a server that never answers
    costs one timeout, not one per request. A server that cannot be reached
    is a CheckFailed at the first request. on_step(label, None) is called
    before each request and on_step(label, answer) after it.
    """
    answers: list[Answer] = []
    silent: Answer | None = None
    for prompt in PROMPTS:
        for mode in ("no-stream", "stream"):
            if silent is not None:
                why = f"not asked: the server gave no answer to {silent.prompt} ({silent.mode}) within --timeout"
                not_asked = Verdict(prompt.name, mode, "not-asked", f"{why} {timeout:g} s", "-")
                answers.append(Answer(prompt.name, prompt.api, mode, verdicts=[not_asked]))
                continue
            on_step(f"{prompt.name} ({mode})", None)
            answer = _ask(endpoint, model, prompt, mode, max_tokens, timeout)
            on_step(f"{prompt.name} ({mode})", answer)
            answers.append(answer)
            if any(v.detail == NO_ANSWER for v in answer.verdicts):
                silent = answer
    _same_answers(answers)
    return SmokeReport(url=endpoint.base_url, model=model, answers=answers)
