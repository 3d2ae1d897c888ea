"""Counting output tokens when the server reports no usage.

The server's own `usage.completion_tokens` is the truth and bench asks for
it in every stream (`stream_options.include_usage`). Servers that ignore the
option leave bench two fallbacks, both named in its output: re-tokenizing
the streamed text with a tokenizer the user names (`--tokenizer`, a
tokenizer.json or a directory holding one; needs the `tokenizers` package),
or counting stream events that carried text (one token per event on SGLang
and vLLM, but not on servers that stream whole words).
"""

from __future__ import annotations

from pathlib import Path

from blackwell_stack import inputfiles
from blackwell_stack.errors import StackError

# The tokenizer.json of a large vocabulary is tens of MiB.
TOKENIZER_LIMIT = 512 * inputfiles.MIB

SOURCE_USAGE = "server usage"
SOURCE_EVENTS = "stream events (no usage from the server, no --tokenizer: approximate)"


class TokenizerCounter:
    def __init__(self, path: str):
        file = Path(path)
        if file.is_dir():
            file = file / "tokenizer.json"
        hint = "pass --tokenizer a tokenizer.json file or a model directory that holds one"
        if not file.exists():
            raise StackError(f"no tokenizer at {path}", hint)
        text = inputfiles.read_text(file, limit=TOKENIZER_LIMIT, what="--tokenizer", hint=hint)
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise StackError(
                "--tokenizer needs the `tokenizers` package",
                "pip install tokenizers, or drop --tokenizer to count stream events instead",
            ) from None
        try:
            self._tokenizer = Tokenizer.from_str(text)
        except Exception as exc:  # the tokenizers package raises its own exception type
            raise StackError(f"--tokenizer {file} is not a tokenizer.json ({exc})", hint) from None
        self.source = f"tokenizer {file} (the server reported no usage)"

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
