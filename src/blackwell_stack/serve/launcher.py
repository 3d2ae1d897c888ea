"""Start `sglang.launch_server` with its keys from systemd credentials.

Run as `python launcher.py ARGV...` by services.sglang (modules/sglang.nix); standalone on purpose: it runs under
the SGLang environment's Python, which does not have blackwell_stack.

sglang 0.5.9 reads its keys only from `--api-key` and `--admin-api-key` (server_args.py: no environment variable; a
`--config` YAML file is merged into argv as well). A key in ExecStart would sit in the Nix store and in
/proc/PID/cmdline for every local user. Instead systemd hands the files to the unit (LoadCredential=api-key:...,
admin-api-key:...), and this script reads $CREDENTIALS_DIRECTORY/<name> and appends `--api-key KEY` to sys.argv
inside the process, where argparse reads it; the exec'd command line never holds it. The trade-off: the key lives in
the server's memory (as it must) and in multiprocessing's spawn data sent to SGLang's worker processes over a pipe.
SGLang logs `server_args=ServerArgs(...)`, with the key, at start (entrypoints/engine.py): a log-record filter here
replaces every key in every log message of this process with "<redacted>".

A key flag already on the command line is refused in every spelling that argparse (allow_abbrev) could read as that
flag: `--api-key`, `--api-k`, `--api`, with or without `=KEY`. The module refuses them at evaluation time already
(lib/sglang-service.nix, secretFlagsIn); this is the last line for a command assembled by hand.
"""

import logging
import os
import runpy
import sys

# systemd credential name -> the SGLang flag it feeds.
CREDENTIALS = {"api-key": "--api-key", "admin-api-key": "--admin-api-key"}


def could_mean(token: str, flag: str) -> bool:
    """Whether argparse with allow_abbrev could read `token` as `flag`.

    argparse takes any prefix of a long option (`--a` and longer) as that
    option when it is unambiguous, and splits `--opt=value` at the first `=`.
    A prefix that is ambiguous among SGLang's flags makes argparse fail, so
    counting it here refuses nothing SGLang would have run.
    """
    name = token.split("=", 1)[0]
    return len(name) > 2 and flag.startswith(name)  # a prefix of the flag longer than "--" is an option


def key_flags_on(args: list[str]) -> list[str]:
    return [flag for flag in CREDENTIALS.values() if any(could_mean(a, flag) for a in args)]


# An API key is one line; a credential longer than this is not one (and is not read whole).
CREDENTIAL_LIMIT = 64 << 10


def read_credential(name: str) -> str | None:
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    if not directory:
        return None
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        key = fh.read(CREDENTIAL_LIMIT + 1)
    if len(key) > CREDENTIAL_LIMIT:
        sys.exit(f"sglang launcher: the credential {name} ({path}) is longer than {CREDENTIAL_LIMIT} characters: "
                 "it is not an API key; write only the key into the file that services.sglang names for it")
    key = key.strip()
    if not key:
        sys.exit(f"sglang launcher: the credential {name} ({path}) is empty; write the key into the file that services.sglang names for it")
    return key


def redact_in_logs(secrets: list[str]) -> None:
    make_record = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = make_record(*args, **kwargs)
        message = record.getMessage()
        if any(s in message for s in secrets):
            for s in secrets:
                message = message.replace(s, "<redacted>")
            record.msg, record.args = message, None
        return record

    logging.setLogRecordFactory(factory)


def main() -> None:
    args = sys.argv[1:]
    given = key_flags_on(args)
    if given:
        sys.exit(
            f"sglang launcher: {', '.join(given)} on the command line is refused (any spelling of it): the key would be "
            "readable in /proc/PID/cmdline; use services.sglang.apiKeyFile / adminApiKeyFile"
        )
    keys = []
    for name, flag in CREDENTIALS.items():
        key = read_credential(name)
        if key is not None:
            keys.append(key)
            args += [flag, key]
    if keys:
        redact_in_logs(keys)
    sys.argv = ["sglang.launch_server", *args]
    runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
