"""What OpenAI-compatible answers say: the text, reasoning and finish reason of each choice, and the usage.

One reader for `smoke` and `bench`, streamed (`chat.completion.chunk` /
`text_completion` events, whose choices carry a `delta` or `text`) and not
(a choice's `message`). An answer of another shape is a ProtocolError that
quotes it: an error event, choices that are not a list of objects, a chat
choice without its delta or message object, text that is not a string.
Reasoning models (Qwen3.5 thinks by default) put part of their answer in
`reasoning_content` (SGLang, vLLM) or `reasoning`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blackwell_stack.verify.wire import ProtocolError


@dataclass(frozen=True)
class ChoiceText:
    content: str | None
    reasoning: str | None
    finish_reason: Any  # as the server sent it (stop, length, ... or the "NaN happened" of a broken model)
    matched_stop: Any = None  # SGLang's: the stop string that ended the answer ("NaN happened" on NaN)


def choice_text(choice: dict, chat: bool, streamed: bool) -> ChoiceText:
    """One choice of an answer (`message`) or of a stream event (`delta`; `text` for completions)."""
    if not chat:
        return ChoiceText(_text(choice.get("text")), None, choice.get("finish_reason"), choice.get("matched_stop"))
    part = choice.get("delta" if streamed else "message")
    if not isinstance(part, dict):
        raise ProtocolError(f"choice has no {'delta' if streamed else 'message'} object: {str(choice)[:120]}")
    return ChoiceText(_text(part.get("content")), _text(part.get("reasoning_content") or part.get("reasoning")),
                      choice.get("finish_reason"), choice.get("matched_stop"))


def stream_event(event: dict, chat: bool) -> tuple[list[ChoiceText], Any]:
    """The choices of one stream event and its usage (None when it carries none)."""
    if "error" in event:
        raise ProtocolError(f"error event in the stream: {str(event['error'])[:200]}")
    choices = event.get("choices") or []
    if not isinstance(choices, list):
        raise ProtocolError(f"stream event's choices is not a list: {str(event)[:120]}")
    read = []
    for choice in choices:
        if not isinstance(choice, dict):
            raise ProtocolError(f"stream choice is not an object: {str(choice)[:120]}")
        read.append(choice_text(choice, chat, streamed=True))
    return read, event.get("usage") or None


def answer_choice(data: dict, chat: bool) -> tuple[ChoiceText, Any]:
    """The first choice of a whole (not streamed) answer, and its usage."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProtocolError(f"answer has no choices: {str(data)[:200]}")
    return choice_text(choices[0], chat, streamed=False), data.get("usage")


def completion_tokens(usage: Any) -> int | None:
    """usage.completion_tokens, when the server gave a whole number."""
    value = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) else None


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError(f"answer text is not a string: {str(value)[:120]}")
