"""Secret flags on the command line: refused, whatever the spelling.

sglang's `--api-key` and `--admin-api-key` take the key itself as their value. In a command line it is readable by
every local user in /proc/PID/cmdline, and in a NixOS unit it lands in the world-readable Nix store. services.sglang
hands keys over as systemd credentials instead (`apiKeyFile`, `adminApiKeyFile`).

SGLang's parser is an argparse parser with allow_abbrev, so `--api-k KEY`, `--api=KEY` and `--api-key=KEY` all set
the key. The check therefore looks at the parsed configuration (the settings, and extraArgs read the way argparse
reads them), never at spellings. lib/sglang-service.nix (`secretFlagsIn`) does the same; tests compare the two and
check both against argparse itself.
"""

from __future__ import annotations

from typing import Any

from blackwell_stack.serve.flags import canonical
from blackwell_stack.serve.render import Rendered
from blackwell_stack.serve.rules import Verdict

SECRET_FLAGS = ("--api-key", "--admin-api-key")
VERDICT_ID = "secret-flag-on-command-line"


def secret_flags_in(rendered: Rendered, table: dict[str, Any]) -> list[str]:
    """The secret flags (primary spelling) the configuration sets or might set.

    An ambiguous abbreviation whose candidates include a secret flag counts:
    argparse refuses it, but the value after it would already be in the unit.
    """
    candidates = [c for _, cands in rendered.parsed.ambiguous for c in cands]
    candidates += [c for name in rendered.settings for c in canonical(name, table)[1]]
    means = {table["options"][c] for c in candidates}
    return [
        flag for flag in SECRET_FLAGS
        if flag in rendered.settings or flag in rendered.parsed.values or flag in means
    ]


def verdict(rendered: Rendered, table: dict[str, Any]) -> Verdict:
    """The check as an error verdict, listed with the rules' verdicts by `serve check`."""
    found = secret_flags_in(rendered, table)
    messages = [
        f"{flag} puts the key on the command line, readable by every local user in /proc/PID/cmdline "
        "(and in the Nix store from a NixOS unit); give it as a file: services.sglang.apiKeyFile / adminApiKeyFile"
        for flag in found
    ]
    return Verdict(VERDICT_ID, "error", bool(messages), messages, option="services.sglang.extraArgs",
                   source="sglang 0.5.9 server_args.py (--api-key, --admin-api-key take the key itself); "
                   "systemd.exec(5) LoadCredential=")
