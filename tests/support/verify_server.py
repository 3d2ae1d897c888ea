"""Servers for the verify tests, on 127.0.0.1.

A real OpenAI-compatible server, `transformers serve`, with models made on
the spot (nothing is downloaded): a byte-level BPE tokenizer trained here on
a few sentences, and small Llamas. Six variants, one server (it loads each
local directory that a request names):

- `random`: random weights, as a broken checkpoint would be.
- `bang`: the final norm's weight is zero, so every logit is 0 and greedy
  decoding picks token id 0, which this variant's tokenizer makes `!`: the
  seeds' "runs of !" symptom.
- `silent`: the same zero norm with id 0 = the end-of-text token: every
  answer is empty.
- `fluent`: sound answers. Its weights are set, not trained: the layers add
  nothing (zero output projections), embeddings are one-hot and the output
  head maps each token to its successor in a fixed sequence, the distinct
  tokens of the training sentences in order, ending with `.` and then the
  end of text. Every answer is that sequence from wherever the prompt's
  last token leads (its start, for a token outside it): varied text, no
  loops, and an end of text after at most `fluent_length()` tokens.
- `endless`: the same, but the sequence starts over after `.` instead of
  ending: every answer runs to its max_tokens (for benchmarks that assume so).
- `attentive`: `fluent`, plus an answer to what the chat prompt asks: the
  capital of France, or a count to 12 (smoke's questions). Its first layer
  attends evenly to the whole prompt and carries the key words' presence
  (`France`, `Count`) to the output head, which starts that question's
  answer after the generation prompt; the answers' tokens are tokens of
  their own, so each leads to the next. The prompt must reach the model and
  attention over it must work: a stand-in for a model that reads the
  question, as smoke needs one to pass.

And `FaultServer`: a scripted server for what no working server does on
purpose, each fault the way a broken one shows it: `silent` (accepts and
never answers), `stall` (lists a model, never answers a completion),
`huge-event` (one SSE event of hundreds of MB), `nan` (empty answers that
finish with "NaN happened", as the seed deployment's did), `nan-text` (every
answer's text is "NaN happened", finished with "stop"), `nan-stop` (SGLang's
own shape: some text, finish_reason "stop" and matched_stop "NaN happened"),
`drop` (the connection closed in the middle of every answer),
`no-models` (an empty model list), `counted` (sound short answers, and
GET /stats: how many completions it was asked for, by max_tokens, to see what
a client sends), and the answers of a server that does not answer the
question: `same-answer` (one sentence for every prompt), `wrong-answer`
(fluent, different and wrong) and, to tell them apart, `sound` (the answers
smoke expects), and `gsm8k`: the reference solution of each GSM8K question it is asked (the accuracy gate's
correct answers; `sound`'s answers to anything else), read from the test.jsonl of the directory given with --data.

The models' server is `transformers serve` that also takes SGLang's
`ignore_eos` (transformers_serve()), which sglang.bench_serving sends.

Also usable by hand (the device run uses it):
    python tests/support/verify_server.py DIR [--port P] [--device cuda] [--size small|gpu]
makes the models under DIR and serves them until interrupted, and
    python tests/support/verify_server.py --fault KIND --port P
serves one fault.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

EOS = "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_CORPUS = [
    "What is the capital of France? The capital of France is Paris.",
    "Count from one to twelve: one, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve.",
    "Once upon a time, in a small village by the sea, there lived an old fisherman and his daughter.",
    "Water boils at 100 degrees Celsius at sea level. The chemical formula of water is H2O.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun.",
    "A language model predicts the next token from the tokens before it, one step at a time.",
]
SIZES = {
    # hidden, intermediate, layers, heads, kv heads
    "small": (64, 128, 2, 4, 2),
    "gpu": (1024, 2816, 8, 16, 4),
}


def _train_tokenizer(vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 20, trainer)
    return tok


def _swap_to_front(tok, token: str):
    """The same BPE with `token` at id 0 (and the token that was there at its old id)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    state = json.loads(tok.to_str())
    vocab = state["model"]["vocab"]
    first = next(t for t, i in vocab.items() if i == 0)
    vocab[first], vocab[token] = vocab[token], 0
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["model"]["merges"]]
    new = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    new.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    new.decoder = decoders.ByteLevel()
    new.add_special_tokens([EOS])
    return new


def fluent_sequence(tok) -> list[int]:
    """The `fluent` model's tokens, in order: each distinct token of the corpus once, `.` last, then EOS."""
    seen: dict[int, None] = {}
    for sentence in _CORPUS:
        for token_id in tok.encode(sentence).ids:
            seen.setdefault(token_id, None)
    period = tok.token_to_id(".")
    ids = [i for i in seen if i != period] + [period]
    return ids + [tok.token_to_id(EOS)]


def fluent_length() -> int:
    """The most tokens a `fluent` answer has before its end of text."""
    return len(fluent_sequence(_train_tokenizer())) - 1


def _set_fluent_weights(model, tok, vocab: int, *, endless: bool = False) -> None:
    """Greedy decoding then follows fluent_sequence: token -> its successor (any other token -> the first).

    endless: the last text token leads back to the first instead of to the end of text.
    """
    import torch

    sequence = fluent_sequence(tok)
    if endless:
        sequence = sequence[:-1] + sequence[:1]
    successor = dict(itertools.pairwise(sequence))
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, :vocab] = torch.eye(vocab)
        model.lm_head.weight.zero_()
        for token in range(vocab):
            model.lm_head.weight[successor.get(token, sequence[0]), token] = 10.0


# `attentive`: a key word of the prompt -> the answer it starts (each piece one token); weights of its logits.
ATTENTIVE_ANSWERS = {
    "France": ["The capital of France", " is Paris."],
    "Count": ["1,", *(f" {n}," for n in range(2, 12)), " 12."],
}
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>"]
_NEXT, _ASKED, _UNASKED = 100.0, 300.0, 1.0  # successor; the asked answer's start; the chain's start (no key word)


def _attentive_tokenizer(base):
    """The base BPE plus the role tags, the key words and the answer pieces as tokens of their own (new ids)."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(base.to_str())
    tok.add_special_tokens(ROLE_TOKENS)
    pieces = [*ATTENTIVE_ANSWERS, *(piece for answer in ATTENTIVE_ANSWERS.values() for piece in answer)]
    tok.add_tokens([AddedToken(piece, normalized=False) for piece in pieces])
    return tok


def _set_attentive_weights(model, tok, base, vocab: int, width: int) -> None:
    """Dimensions 0..vocab-1 of the residual stream are one-hot tokens; dimension vocab+i is key word i's share of
    the prompt, which layer 0's attention writes: its queries and keys are zero, so every position weighs alike,
    and its values are 1 at key words. The head maps each token to its successor (`fluent`'s chain, or the next
    piece of an answer), and the share of key word i to answer i's first piece, which wins only at the generation
    prompt (the one token without a successor; every other token's weight is larger than any share's)."""
    import torch

    chain = fluent_sequence(base)  # the base's ids are the same in tok: added tokens come after them
    successor = dict(itertools.pairwise(chain))
    eos = tok.token_to_id(EOS)
    for answer in ATTENTIVE_ANSWERS.values():
        successor.update(itertools.pairwise([tok.token_to_id(piece) for piece in answer] + [eos]))
    asked = tok.token_to_id("<|assistant|>")
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                         layer.self_attn.o_proj, layer.mlp.down_proj):
                proj.weight.zero_()
        attention = model.model.layers[0].self_attn
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, :vocab] = torch.eye(vocab)
        model.lm_head.weight.zero_()
        for token in range(vocab):
            model.lm_head.weight[successor.get(token, chain[0]), token] = _UNASKED if token == asked else _NEXT
        for i, (key, answer) in enumerate(ATTENTIVE_ANSWERS.items()):
            # RMSNorm scales a one-hot row to sqrt(width): the value is 1 at a key word.
            attention.v_proj.weight[i, tok.token_to_id(key)] = width ** -0.5
            attention.o_proj.weight[vocab + i, i] = 1.0  # head 0 reads kv head 0's value dimension i
            model.lm_head.weight[tok.token_to_id(answer[0]), vocab + i] = _ASKED


def make_models(root: Path, size: str = "small", names: tuple[str, ...] | None = None) -> dict[str, Path]:
    """Writes the model directories under root (every variant, or those named); returns name -> directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    hidden, inter, layers, heads, kv = SIZES[size]
    base_tok = _train_tokenizer()
    variants = {"random": base_tok, "bang": _swap_to_front(base_tok, "!"), "silent": base_tok, "fluent": base_tok,
                "endless": base_tok, "attentive": _attentive_tokenizer(base_tok)}
    out = {}
    for name, tok in variants.items():
        if names is not None and name not in names:
            continue
        directory = root / name
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS)
        fast.chat_template = CHAT_TEMPLATE
        eos_id = fast.convert_tokens_to_ids(EOS)
        vocab = tok.get_vocab_size()
        width = hidden
        if name in ("fluent", "endless", "attentive"):  # one-hot embeddings: a dimension per token (and key word)
            width = max(hidden, -(-(vocab + len(ATTENTIVE_ANSWERS)) // (2 * heads)) * 2 * heads)
        config = LlamaConfig(
            vocab_size=vocab,
            hidden_size=width,
            intermediate_size=inter,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            max_position_embeddings=4096,
            bos_token_id=None,
            eos_token_id=eos_id,
            pad_token_id=eos_id,
            tie_word_embeddings=False,
        )
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
        if name in ("bang", "silent"):
            with torch.no_grad():
                model.model.norm.weight.zero_()  # every logit 0: greedy picks id 0
        elif name in ("fluent", "endless"):
            _set_fluent_weights(model, tok, vocab, endless=name == "endless")
        elif name == "attentive":
            _set_attentive_weights(model, tok, base_tok, vocab, width)
        model.generation_config.eos_token_id = eos_id
        model.generation_config.pad_token_id = eos_id
        model.save_pretrained(directory)
        fast.save_pretrained(directory)
        out[name] = directory
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def end_process(proc: subprocess.Popen) -> None:
    """Terminate a server this file started, and kill it if it does not stop in 20 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Server:
    """`transformers serve` in a child process on 127.0.0.1; stop() ends it."""

    def __init__(self, port: int, log: Path, device: str = "cpu", extra: list[str] | None = None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, __file__, "--transformers", "serve", "--host", "127.0.0.1", "--port", str(port), "--device", device, *(extra or [])]
        # transformers serve loads each model in a process of its own, and multiprocessing shares tensors over a
        # Unix socket under TMPDIR, whose path may be at most 107 bytes ("AF_UNIX path too long" under a long
        # TMPDIR): the server gets a short temporary directory of its own.
        self._tmp = tempfile.mkdtemp(prefix="vs-", dir="/tmp" if os.path.isdir("/tmp") else None)
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   TMPDIR=self._tmp)
        self.log = log
        self._log_fh = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log_fh, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"transformers serve not ready after {timeout:g} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        end_process(self.proc)
        self._log_fh.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


FAULTS = ("silent", "stall", "huge-event", "nan", "nan-text", "nan-stop", "drop", "no-models",
          "negative-chunk", "unicode-length", "escape-model", "same-answer", "wrong-answer", "sound", "gsm8k")
# What `sound` answers, by a word of the prompt (smoke's prompts); any other prompt gets its own sentence.
SOUND_ANSWERS = {
    "capital": "The capital of France is Paris.",
    "Count": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12",
    "village": " an old fisherman and his daughter.",
    "formula": " H2O.",
}
# `same-answer` gives this to every prompt (it holds what smoke looks for in each answer); `wrong-answer` answers
# each prompt with a sentence of its own that holds neither.
SAME_ANSWER = "The capital of France is Paris. 1, 2, 3, 4, 5, 6."


def _gsm8k_solutions(data: Path) -> dict[str, str]:
    """Each question of data/test.jsonl -> its reference solution (ending in `#### <number>`)."""
    rows = (json.loads(line) for line in (data / "test.jsonl").read_text().splitlines())
    return {row["question"]: row["answer"] for row in rows}


def _gsm8k_answer(solutions: dict[str, str], body: dict) -> str:
    """The solution of the prompt's last question (a few-shot prompt ends "Question: ...\nAnswer:"); any other
    prompt gets what `sound` answers (a server that passes smoke too)."""
    prompt = str(body.get("prompt") or "")
    question = prompt.rsplit("Question: ", 1)[-1].removesuffix("\nAnswer:")
    return " " + solutions[question] if question in solutions else _scripted("sound", body)


def _scripted(fault: str, body: dict) -> str:
    messages = body.get("messages") or [{}]
    prompt = str(body.get("prompt") or messages[-1].get("content") or "")
    if fault == "same-answer":
        return SAME_ANSWER
    if fault == "wrong-answer":
        return f"I believe the answer is Berlin, and the question has {len(prompt)} characters."
    return next((text for word, text in SOUND_ANSWERS.items() if word in prompt),
                f"A sentence about {' '.join(prompt.split()[-3:])}.")
# The model id the `escape-model` fault lists: terminal control sequences (clear the screen, set the title).
ESCAPE_MODEL = "evil\x1b[2J\x1b]0;owned\x07"
# How much the `huge-event` fault sends of its one event at most (it stops when the client hangs up).
HUGE_EVENT_BYTES = 256 << 20


def _json_answer(data: dict) -> bytes:
    body = json.dumps(data).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


_SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _nan_answer(path: str, stream: bool) -> bytes:
    """An answer with no text that finishes with "NaN happened" (chat: null content)."""
    chat = path.endswith("/chat/completions")
    usage = {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}
    if not stream:
        choice = {"index": 0, "finish_reason": "NaN happened"}
        choice.update({"message": {"role": "assistant", "content": None}} if chat else {"text": ""})
        return _json_answer({"object": "chat.completion" if chat else "text_completion", "choices": [choice], "usage": usage})
    choice = {"index": 0, "finish_reason": "NaN happened"}
    choice.update({"delta": {"content": None}} if chat else {"text": ""})
    events = [{"choices": [choice]}, {"choices": [], "usage": usage}]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return _SSE_HEAD + _chunk(body) + b"0\r\n\r\n"


def _text_answer(path: str, stream: bool, text: str, extra: dict, usage_event: bool = True) -> bytes:
    """A whole answer of `text`, finished with "stop", its choice carrying `extra` too (SGLang's matched_stop);
    streamed, its usage in an event of its own unless not usage_event (stream_options.include_usage false)."""
    chat = path.endswith("/chat/completions")
    usage = {"prompt_tokens": 8, "completion_tokens": 3, "total_tokens": 11}
    choice = {"index": 0, "finish_reason": "stop", **extra}
    if not stream:
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return _json_answer({"object": "chat.completion" if chat else "text_completion", "choices": [choice], "usage": usage})
    choice.update({"delta": {"content": text}} if chat else {"text": text})
    events = [{"choices": [choice]}] + ([{"choices": [], "usage": usage}] if usage_event else [])
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return _SSE_HEAD + _chunk(body) + b"0\r\n\r\n"


def _cut_answer(path: str, stream: bool) -> bytes:
    """The start of an answer, then nothing: a body shorter than its Content-Length, or a stream delimited by the
    connection's end that stops before its `data: [DONE]` (the handler closes the connection after it)."""
    chat = path.endswith("/chat/completions")
    if not stream:
        return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4096\r\n\r\n{\"choices\": ["
    choice = {"index": 0, "finish_reason": None, **({"delta": {"content": "The"}} if chat else {"text": "The"})}
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
            + b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")


async def _serve_fault(fault: str, port: int, data: Path | None = None) -> None:
    import asyncio

    solutions = _gsm8k_solutions(data) if fault == "gsm8k" and data is not None else {}

    listed = [] if fault == "no-models" else [{"id": ESCAPE_MODEL if fault == "escape-model" else f"fault-{fault}",
                                               "object": "model"}]
    models = _json_answer({"object": "list", "data": listed})

    async def handle(reader, writer) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line = head.split(b"\r\n", 1)[0].decode()
            method, path = request_line.split(" ")[:2]
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            body = json.loads(await reader.readexactly(length)) if length else {}
            if fault == "silent" or (fault == "stall" and method == "POST"):
                await reader.read()  # hold the connection, answer nothing, until the client hangs up
            elif fault == "unicode-length":  # a length str.isdigit() passes and int() refuses, then the body
                answer = models if method == "GET" else _text_answer(path, False, "Paris.", {})
                writer.write(answer.replace(b"content-length: %d" % (len(answer) - answer.index(b"\r\n\r\n") - 4),
                                            "content-length: ¹²".encode()))
            elif method == "GET" and path.endswith("/models"):
                writer.write(models)
            elif fault == "negative-chunk":  # a chunk size int(, 16) takes: -6
                writer.write(_SSE_HEAD + b"-6\r\ndata: \r\n")
            elif fault == "escape-model":
                writer.write(_text_answer(path, bool(body.get("stream")), _scripted("sound", body), {}))
            elif fault == "gsm8k":
                text = _gsm8k_answer(solutions, body)
                writer.write(_text_answer(path, bool(body.get("stream")), text, {}))
            elif fault in ("same-answer", "wrong-answer", "sound"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                writer.write(_text_answer(path, bool(body.get("stream")), _scripted(fault, body), {}, usage))
            elif fault == "nan":
                writer.write(_nan_answer(path, bool(body.get("stream"))))
            elif fault == "nan-text":
                writer.write(_text_answer(path, bool(body.get("stream")), "NaN happened", {}))
            elif fault == "nan-stop":
                writer.write(_text_answer(path, bool(body.get("stream")), "The capital of",
                                          {"matched_stop": "NaN happened"}))
            elif fault == "drop":
                writer.write(_cut_answer(path, bool(body.get("stream"))))
            elif fault == "huge-event":
                writer.write(_SSE_HEAD + _chunk(b'data: {"choices": [{"index": 0, "text": "'))
                block = _chunk(b"a" * (1 << 20))
                for _ in range(HUGE_EVENT_BYTES >> 20):
                    writer.write(block)
                    await writer.drain()
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass  # the client went away: what the faults are for
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print(f"ready at http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


class FaultServer:
    """One fault of FAULTS, served by this file in a child process on 127.0.0.1; stop() ends it."""

    def __init__(self, fault: str, data: Path | None = None):
        """data: the directory of GSM8K's test.jsonl (the `gsm8k` fault's answers)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}: one of {FAULTS}")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--fault", fault, "--port", str(self.port),
             *(["--data", str(data)] if data is not None else [])],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.stop()
            raise RuntimeError(f"the {fault} fault server did not start: {line}")

    def stop(self) -> None:
        end_process(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def transformers_serve(argv: list[str]) -> None:
    """`transformers serve` that takes SGLang's `ignore_eos` too, as SGLang does: true runs every answer to its
    max tokens (`min_new_tokens`). sglang.bench_serving sends the field in every request, and transformers
    refuses fields it does not know (HTTP 422)."""
    from transformers.cli import transformers
    from transformers.cli.serving.chat_completion import ChatCompletionHandler
    from transformers.cli.serving.completion import CompletionHandler

    for handler in (ChatCompletionHandler, CompletionHandler):
        validate, build = handler._validate_request, handler._build_generation_kwargs

        def _validate(self, body, validate=validate):
            validate(self, {k: v for k, v in body.items() if k != "ignore_eos"})

        def _build(self, body, config, build=build):
            kwargs = build(self, body, config)
            if body.get("ignore_eos"):
                kwargs["min_new_tokens"] = kwargs["max_new_tokens"]
            return kwargs

        handler._validate_request, handler._build_generation_kwargs = _validate, _build
    sys.argv = ["transformers", *argv]
    transformers.main()


def main() -> int:
    if sys.argv[1:2] == ["--transformers"]:
        transformers_serve(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path, nargs="?")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra argument for transformers serve")
    parser.add_argument("--fault", choices=FAULTS, help="serve this fault instead of the models")
    parser.add_argument("--data", type=Path, help="the directory of GSM8K's test.jsonl (for --fault gsm8k)")
    args = parser.parse_args()
    if args.fault:
        import asyncio

        asyncio.run(_serve_fault(args.fault, args.port, args.data))
        return 0
    if args.dir is None:
        parser.error("give DIR (where the models are made), or --fault")
    models = make_models(args.dir, args.size)
    print(json.dumps({k: str(v) for k, v in models.items()}), flush=True)
    server = Server(args.port, args.dir / "server.log", args.device, args.serve_arg)
    try:
        server.wait_ready()
        print(f"ready at {server.url}", flush=True)
        server.proc.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
