"""`smoke`: fixed prompts at temperature 0, streamed and not, judged for garbage.

Every prompt goes to its endpoint twice (stream and no stream). A verdict is
one failed check on one answer and names the prompt, the mode, the check
and the offending text. Reasoning models (Qwen3.5 thinks by default) may
put their text in `reasoning_content`; that text is judged too, and an
answer is empty only when both fields are.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field

from blackwell_stack.verify import degeneracy, events, failure_text
from blackwell_stack.verify.openai_client import (
    Endpoint,
    HTTPStatusError,
    ProtocolError,
    describe_error,
    request_json,
    stream_events,
)
from blackwell_stack.verify.wire import ConnectionDropped


@dataclass(frozen=True)
class Prompt:
    name: str
    api: str  # "chat" or "completion"
    text: str


PROMPTS = (
    Prompt("capital", "chat", "What is the capital of France? Answer in one sentence."),
    Prompt("count", "chat", "Count from one to twelve in words, separated by commas."),
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
        return {
            "url": self.url,
            "model": self.model,
            "ok": self.ok,
            "answers": [asdict(a) for a in self.answers],
            "verdicts": [asdict(v) for v in self.verdicts],
        }


def request_body(prompt: Prompt, model: str, max_tokens: int, stream: bool) -> dict:
    body: dict = {"model": model, "temperature": 0, "max_tokens": max_tokens}
    if prompt.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _path(prompt: Prompt) -> str:
    return "/chat/completions" if prompt.api == "chat" else "/completions"


def _joined(content: str | None, reasoning: str | None) -> str | None:
    if content is None and reasoning is None:
        return None
    return (reasoning or "") + (content or "")


async def _ask_plain(endpoint: Endpoint, prompt: Prompt, body: dict, answer: Answer, timeout: float) -> None:
    data = await request_json(endpoint, "POST", _path(prompt), body, timeout=timeout)
    choice, usage = events.answer_choice(data, prompt.api == "chat")
    answer.text = _joined(choice.content, choice.reasoning)
    answer.finish_reason = choice.finish_reason
    answer.matched_stop = choice.matched_stop
    answer.completion_tokens = events.completion_tokens(usage)


async def _ask_stream(endpoint: Endpoint, prompt: Prompt, body: dict, answer: Answer, timeout: float,
                      partial: list[str]) -> None:
    content = partial
    reasoning: list[str] = []
    saw_content = False

    def on_events(_stamp: float, batch: list[dict]) -> None:
        nonlocal saw_content
        for event in batch:
            choices, usage = events.stream_event(event, prompt.api == "chat")
            if usage:
                answer.completion_tokens = events.completion_tokens(usage)
            for choice in choices:
                if choice.content is not None:
                    content.append(choice.content)
                    saw_content = True
                if choice.reasoning:
                    reasoning.append(choice.reasoning)
                if choice.finish_reason is not None:
                    answer.finish_reason = choice.finish_reason
                if choice.matched_stop is not None:
                    answer.matched_stop = choice.matched_stop

    await stream_events(endpoint, _path(prompt), body, on_events, timeout=timeout)
    answer.text = _joined("".join(content) if saw_content else None, "".join(reasoning) or None)


async def _run_one(endpoint: Endpoint, model: str, prompt: Prompt, stream: bool, max_tokens: int, timeout: float) -> Answer:
    mode = "stream" if stream else "no-stream"
    answer = Answer(prompt=prompt.name, api=prompt.api, mode=mode)
    body = request_body(prompt, model, max_tokens, stream)
    loop = asyncio.get_running_loop()
    started = loop.time()
    partial: list[str] = []  # what a stream carried before it was cut
    try:
        if stream:
            await _ask_stream(endpoint, prompt, body, answer, timeout, partial)
        else:
            await _ask_plain(endpoint, prompt, body, answer, timeout)
    except HTTPStatusError as exc:
        answer.verdicts.append(Verdict(prompt.name, mode, "http", f"HTTP status {exc.status}", repr(exc.body[:200])))
        return answer
    except ConnectionDropped as exc:
        so_far = degeneracy.excerpt("".join(partial), width=60) if partial else "-"
        answer.verdicts.append(Verdict(prompt.name, mode, "dropped", f"the server closed the connection before the "
                                       f"answer ended: {exc}", f"text so far: {so_far}"))
        return answer
    except TimeoutError as exc:
        answer.verdicts.append(Verdict(prompt.name, mode, "http", NO_ANSWER, describe_error(exc)))
        return answer
    except ProtocolError as exc:
        answer.verdicts.append(Verdict(prompt.name, mode, "protocol", "answer is not valid OpenAI JSON/SSE", str(exc)[:200]))
        return answer
    except OSError as exc:
        answer.verdicts.append(Verdict(prompt.name, mode, "http", "request failed", describe_error(exc)))
        return answer
    finally:
        answer.seconds = round(loop.time() - started, 3)
    findings = failure_text.find(answer.text, answer.finish_reason, answer.matched_stop)
    reason = degeneracy.finish_reason(answer.finish_reason)
    if reason:
        findings.append(reason)
    findings += degeneracy.inspect_text(answer.text)
    answer.verdicts.extend(Verdict(prompt.name, mode, f.check, f.detail, f.excerpt) for f in findings)
    return answer


async def run_smoke(
    endpoint: Endpoint,
    model: str,
    *,
    prompts: tuple[Prompt, ...] = PROMPTS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> SmokeReport:
    """Ask every prompt streamed and not streamed, one request at a time (a smoke test, not a load).

    A request that gets no answer within `timeout` ends the asking: the rest
    are verdicts of their own ("not-asked"), so a server that never answers
    costs one timeout, not one per request.
    """
    answers: list[Answer] = []
    silent: Answer | None = None
    for prompt in prompts:
        for stream in (False, True):
            if silent is not None:
                answers.append(_not_asked(prompt, stream, silent, timeout))
                continue
            answer = await _run_one(endpoint, model, prompt, stream, max_tokens, timeout)
            answers.append(answer)
            if any(v.detail == NO_ANSWER for v in answer.verdicts):
                silent = answer
    return SmokeReport(url=endpoint.base_url, model=model, answers=answers)


def _not_asked(prompt: Prompt, stream: bool, silent: Answer, timeout: float) -> Answer:
    mode = "stream" if stream else "no-stream"
    answer = Answer(prompt=prompt.name, api=prompt.api, mode=mode)
    answer.verdicts.append(Verdict(prompt.name, mode, "not-asked", f"not asked: the server gave no answer to "
                                   f"{silent.prompt} ({silent.mode}) within --timeout {timeout:g} s", "-"))
    return answer
