"""Stand-in for `python -m sglang.launch_server` (modules/tests/sglang-vm.nix).

It accepts SGLang's command line (the flags the module renders; the ones it
does not know are ignored), and serves what services.sglang's gates and
`blackwell-stack smoke` talk to, the way SGLang does:

- GET /health: 200 once "loaded" (after STAND_IN_LOAD_SECONDS, default 2),
  503 before; no key needed (sglang srt/utils/auth.py exempts /health);
- GET /v1/models, POST /v1/chat/completions and /v1/completions (stream or
  not, with the usage chunk when asked): a Bearer key is required when
  --api-key was given, as SGLang requires it.

STAND_IN_ANSWERS picks the answers: `good` (short sensible sentences) or
`garbage` (runs of "!", the symptom of the deployment this project
reproduces). Standard library only: it runs under a plain Python.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD = {
    "capital": "The capital of France is Paris.",
    "count": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12.",
    "once upon": " an old fisherman who mended his nets by the harbour every morning.",
    "water": " H2O: two hydrogen atoms bound to one oxygen atom.",
}
DEFAULT_GOOD = "Here is a short and sensible answer."


def answer_for(prompt: str, mode: str, max_tokens: int) -> str:
    if mode == "garbage":
        return "!" * max(24, max_tokens)
    lowered = prompt.lower()
    for key, text in GOOD.items():
        if key in lowered:
            return text
    return DEFAULT_GOOD


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="sglang.launch_server (stand-in)")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--api-key")
    parser.add_argument("--admin-api-key")
    args, _ignored = parser.parse_known_args(argv)
    return args


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler, settings):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self.settings = settings


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, fmt, *args):
        sys.stderr.write("stand-in sglang: " + (fmt % args) + "\n")

    def _send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self):
        key = self.server.settings["api_key"]
        if key is None:
            return True
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._send_json(401, {"error": {"message": "Invalid API Key", "type": "invalid_request_error"}})
        return False

    def do_GET(self):
        settings = self.server.settings
        if self.path.startswith("/health"):
            loaded = time.monotonic() >= settings["ready_at"]
            self._send_json(200 if loaded else 503, {"status": "ok" if loaded else "loading"})
            return
        if not self._authorized():
            return
        if self.path in ("/v1/models", "/v1/models/"):
            self._send_json(200, {"object": "list", "data": [{"id": settings["model"], "object": "model", "owned_by": "stand-in"}]})
            return
        self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        if not self._authorized():
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "body is not JSON"}})
            return
        if self.path == "/v1/chat/completions":
            messages = body.get("messages") or []
            prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
            chat = True
        elif self.path == "/v1/completions":
            prompt = str(body.get("prompt", ""))
            chat = False
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        settings = self.server.settings
        text = answer_for(prompt, settings["answers"], int(body.get("max_tokens") or 16))
        finish = "length" if settings["answers"] == "garbage" else "stop"
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()) or 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        model = body.get("model") or settings["model"]
        if body.get("stream"):
            self._stream(chat, model, text, finish, usage, bool((body.get("stream_options") or {}).get("include_usage")))
            return
        choice = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        kind = "chat.completion" if chat else "text_completion"
        self._send_json(200, {"id": "stand-in", "object": kind, "model": model, "choices": [choice], "usage": usage})

    def _stream(self, chat, model, text, finish, usage, include_usage):
        # Server-sent events, the body ending with the connection (HTTP/1.0).
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(choices, extra=None):
            payload = {"id": "stand-in", "object": kind, "model": model, "choices": choices, **(extra or {})}
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()

        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            delta = {"content": piece} if chat else None
            choice = {"index": 0, "finish_reason": None}
            if chat:
                choice["delta"] = delta
            else:
                choice["text"] = piece
            event([choice])
        last = {"index": 0, "finish_reason": finish}
        if chat:
            last["delta"] = {}
        else:
            last["text"] = ""
        event([last])
        if include_usage:
            event([], {"usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    answers = os.environ.get("STAND_IN_ANSWERS", "good")
    if answers not in ("good", "garbage"):
        sys.exit(f"stand-in sglang: STAND_IN_ANSWERS={answers!r}: expected good or garbage")
    load_seconds = float(os.environ.get("STAND_IN_LOAD_SECONDS", "2"))
    settings = {
        "model": args.model_path,
        "api_key": args.api_key,
        "answers": answers,
        "ready_at": time.monotonic() + load_seconds,
    }
    server = Server((args.host, args.port), Handler, settings)
    print(
        f"stand-in sglang: answers {answers}, model {args.model_path}, on {args.host}:{args.port}, "
        f"API key {'required' if args.api_key else 'not required'}",
        file=sys.stderr,
        flush=True,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
