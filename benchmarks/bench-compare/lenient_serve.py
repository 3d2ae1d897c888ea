"""`transformers serve` that drops the request fields SGLang's bench_serving always sends and it refuses.

bench_serving puts `ignore_eos` (an SGLang/vLLM extension) and `best_of` in
every request; transformers serve answers HTTP 422 to fields it does not know.
This launcher removes those two before the server validates a request, and
changes nothing else: both clients of the comparison talk to this same server.
The model the comparison uses never ends an answer early, so ignoring
`ignore_eos` changes no answer.

    python benchmarks/bench-compare/lenient_serve.py --host 127.0.0.1 --port 8000 [transformers serve options]
"""

from __future__ import annotations

import sys

from transformers.cli.serving import utils

_DROPPED = ("ignore_eos", "best_of")
_validate = utils.BaseHandler._validate_request


def _lenient(self, body):
    for key in _DROPPED:
        body.pop(key, None)
    return _validate(self, body)


utils.BaseHandler._validate_request = _lenient

if __name__ == "__main__":
    from transformers.cli.transformers import main

    sys.argv = ["transformers", "serve", *sys.argv[1:]]
    main()
