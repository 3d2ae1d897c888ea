"""Start `sglang.launch_server` with the API key from a systemd credential.

Run as `python launcher.py ARGV...` by services.sglang (modules/sglang.nix);
standalone on purpose: it runs under the SGLang environment's Python, which
does not have blackwell_stack.

sglang 0.5.9 reads its API key only from `--api-key` (server_args.py: no
environment variable, and `--config` YAML is merged into argv as well). A key
in ExecStart would sit in the Nix store and in /proc/PID/cmdline for every
local user. Instead systemd hands the file to the unit (LoadCredential=), this
script reads $CREDENTIALS_DIRECTORY/api-key and appends `--api-key KEY` to
sys.argv inside the process, where argparse reads it; the exec'd command
line never holds it. The trade-off: the key lives in the server's memory (as
it must) and in multiprocessing's spawn data sent to SGLang's worker
processes over a pipe. SGLang logs `server_args=ServerArgs(...)`, with the
key, at start (entrypoints/engine.py): a log-record filter here replaces the
key in every log message of this process with "<redacted>".
"""

import logging
import os
import runpy
import sys

CREDENTIAL = "api-key"


def read_key() -> str | None:
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    if not directory:
        return None
    path = os.path.join(directory, CREDENTIAL)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        key = fh.read().strip()
    if not key:
        sys.exit(f"sglang launcher: the credential {CREDENTIAL} ({path}) is empty; put the API key in services.sglang.apiKeyFile")
    return key


def redact_in_logs(secret: str) -> None:
    make_record = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = make_record(*args, **kwargs)
        message = record.getMessage()
        if secret in message:
            record.msg, record.args = message.replace(secret, "<redacted>"), None
        return record

    logging.setLogRecordFactory(factory)


def main() -> None:
    args = sys.argv[1:]
    if "--api-key" in args or any(a.startswith("--api-key=") for a in args):
        sys.exit("sglang launcher: --api-key on the command line is refused; use services.sglang.apiKeyFile")
    key = read_key()
    if key is not None:
        redact_in_logs(key)
        args += ["--api-key", key]
    sys.argv = ["sglang.launch_server", *args]
    runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
