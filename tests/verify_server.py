"""A real OpenAI-compatible server for the verify tests: `transformers serve` on 127.0.0.1.

The models are made on the spot, nothing is downloaded: a byte-level BPE
tokenizer trained here on a few sentences, and a 2-layer Llama with random
weights. Three variants, one server (it loads each local directory that a
request names):

- `random`: random weights, as a broken checkpoint would be.
- `bang`: the final norm's weight is zero, so every logit is 0 and greedy
  decoding picks token id 0, which this variant's tokenizer makes `!`: the
  seeds' "runs of !" symptom.
- `silent`: the same zero norm with id 0 = the end-of-text token: every
  answer is empty.

Also usable by hand (the device run uses it):
    python tests/verify_server.py DIR [--port P] [--device cuda] [--size small|gpu]
makes the models under DIR and serves them until interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
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


def make_models(root: Path, size: str = "small") -> dict[str, Path]:
    """Writes the three model directories under root; returns name -> directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    hidden, inter, layers, heads, kv = SIZES[size]
    base_tok = _train_tokenizer()
    variants = {"random": base_tok, "bang": _swap_to_front(base_tok, "!"), "silent": base_tok}
    out = {}
    for name, tok in variants.items():
        directory = root / name
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS)
        fast.chat_template = CHAT_TEMPLATE
        eos_id = fast.convert_tokens_to_ids(EOS)
        config = LlamaConfig(
            vocab_size=tok.get_vocab_size(),
            hidden_size=hidden,
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


class Server:
    """`transformers serve` in a child process on 127.0.0.1; stop() ends it."""

    def __init__(self, port: int, log: Path, device: str = "cpu", extra: list[str] | None = None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        exe = shutil.which("transformers")
        argv = [exe] if exe else [sys.executable, "-m", "transformers.cli.transformers"]
        argv += ["serve", "--host", "127.0.0.1", "--port", str(port), "--device", device, *(extra or [])]
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
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
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_fh.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra argument for transformers serve")
    args = parser.parse_args()
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
