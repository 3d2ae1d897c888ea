"""`plan`, the main job, answers in one screen: each stack's versions, verdict and next command first.

The default invocation fits 40 lines of a 100-column terminal with no line
wider; `plan SECTION` lists a section item by item without splitting a hash
or a path; `--wide` prints every row whole; `--json` has everything,
whatever the view.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
# What a person keeps whole: git revisions and sha256 digests (hex), SRI hashes.
IDENTIFIER = re.compile(r"\b[0-9a-f]{40}\b|\b[0-9a-f]{64}\b|sha256-[A-Za-z0-9+/]{43}=")


def plan(*argv: str, columns: str = "100") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": columns}
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "plan", *argv], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def as_json() -> dict:
    return json.loads(plan("--json").stdout)


def test_the_default_answer_fits_one_screen_of_100_columns():
    lines = plan().stdout.splitlines()
    assert len(lines) <= 40, len(lines)
    assert max(len(line) for line in lines) <= 100, [line for line in lines if len(line) > 100]


def test_each_stack_comes_first_with_its_versions_verdict_and_next_command(as_json):
    text = plan().stdout
    head = "\n".join(text.splitlines()[:15])  # the answer comes before any section
    assert set(as_json["stacks"]) == {"stable", "current", "nightly"}
    assert next(iter(as_json["stacks"])) == "stable" and as_json["stacks"]["stable"]["default"] is True
    for name, summary in as_json["stacks"].items():
        assert f"{name}" in head and f"next: {summary['next']}" in head, name
        assert summary["verdict"] in " ".join(head.split()), name  # wrapped at spaces, never cut
    # The versions, as the locks hold them.
    for versions in ("SGLang 0.5.9, flashinfer 0.6.5, torch 2.12.1, sgl-kernel 0.3.21",
                     "SGLang 0.5.23, flashinfer 0.7.2, torch 2.14.1, sglang-kernel 0.4.10"):
        assert versions in " ".join(head.split())
    assert "next: nix build .#sglang-env\n" in text + "\n"
    assert "next: blackwell-stack stack lock nightly --wheels DIR" in text


def test_a_verdict_tells_broken_from_pending_in_one_vocabulary(as_json):
    stable = as_json["stacks"]["stable"]
    items = [i for s in as_json["sections"].values() for i in s["items"]]
    gpu = [i for i in items if i["verified"] and (i["checked_by"] or "").startswith("not checked here")
           and "GPU host" in i["checked_by"]]
    assert stable["counts"]["waits for the GPU host"] == len(gpu) > 0
    assert stable["counts"]["unverified"] == len(as_json["unverified"])
    assert sum(stable["counts"][k] for k in ("unverified", "waits for the GPU host", "not checked here",
                                              "checked here")) == len(items)
    # The stable stack's only unverified item is a service setting (the model's revision): pending, not broken.
    assert stable["counts"]["blocking"] == 0
    assert stable["verdict"] == (f"ready to build; {len(gpu)} checks wait for the GPU host; "
                                 f"{stable['counts']['unverified']} setting unverified before serving; "
                                 f"{stable['counts']['not checked here']} "
                                 f"{'value' if stable['counts']['not checked here'] == 1 else 'values'} not checked here")
    # A stack without its lock is blocked, and says by how many items.
    nightly = json.loads(plan("--json", "--stack", "nightly").stdout)["stacks"]["nightly"]
    assert nightly["counts"]["blocking"] > 0
    assert nightly["verdict"].startswith(f"blocked: {nightly['counts']['blocking']} unverified items stop the build; ")


def test_pins_show_says_what_plan_says_of_each_pin(as_json):
    env = {**os.environ, "PYTHONPATH": SRC}
    shown = subprocess.run([sys.executable, "-m", "blackwell_stack", "pins", "show", "--json"], capture_output=True,
                           text=True, env=env, timeout=300)
    pins = {p["what"]: p for p in json.loads(shown.stdout)["pins"]}
    in_plan = {i["name"]: i for i in as_json["sections"]["pins"]["items"]}
    compared = 0
    for name, item in in_plan.items():
        if name in pins:
            assert pins[name]["checked"] == (item["checked_by"] if item["verified"] else "UNVERIFIED"), name
            compared += 1
    assert compared > 3
    assert any(p["checked"] == "not checked here (named by a public source)" for p in pins.values())
    text = subprocess.run([sys.executable, "-m", "blackwell_stack", "pins", "show"], capture_output=True, text=True,
                          env=env, timeout=300).stdout
    assert "verified" not in text.splitlines()[0] and "checked" in text.splitlines()[0]
    assert " checked here; " in text and "(as `blackwell-stack plan` counts them)" in text


@pytest.mark.parametrize("columns", ["80", "100"])
def test_a_section_lists_its_items_without_splitting_a_hash_or_a_path(as_json, columns):
    for key, section in as_json["sections"].items():
        text = plan(key.split("-", 1)[0], columns=columns).stdout
        lines = text.splitlines()
        assert max(len(line) for line in lines if not line.startswith("  $ ")) <= int(columns), key
        shown = [i for i in section["items"] if not i["detail"]]
        for item in shown:
            assert f"{item['name']}: " in text, (key, item["name"])
            for field in ("value", "source", "checked_by"):
                for identifier in IDENTIFIER.findall(item[field] or ""):
                    assert identifier in text, (key, item["name"], identifier)
        for word in {w for i in shown for w in (i["source"] or "").split() if "/" in w and len(w) < int(columns) - 6}:
            assert word in text.split(), (key, word)  # a path stays on one line


def test_wide_prints_every_row_whole_and_json_has_every_item(as_json):
    wide = plan("--wide").stdout
    for section in as_json["sections"].values():
        for item in section["items"]:
            # The start of the value: the job plan's says how much memory is available now, which moves.
            start = item["value"][:16]
            assert any(line.startswith(item["name"]) and start in line for line in wide.splitlines()), item
    every = json.loads(plan("--json", "--stack", "all").stdout)
    assert set(every["stacks"]) == {"current", "nightly", "stable"}
    assert any(i["detail"] for s in every["sections"].values() for i in s["items"])  # the locked files too


def test_every_listing_gives_the_stacks_in_one_order_the_default_first(as_json):
    from blackwell_stack.data import stack as stack_data

    order = stack_data.names()
    assert order[0] == stack_data.default_name() and order[1:] == sorted(order[1:])
    assert list(json.loads(plan("--json", "--stack", "all").stdout)["stacks"]) == order
    assert list(as_json["stacks"]) == order
    env = {**os.environ, "PYTHONPATH": SRC}
    shown = subprocess.run([sys.executable, "-m", "blackwell_stack", "pins", "show", "--json"], capture_output=True,
                           text=True, env=env, timeout=300)
    stacks = [p["what"].split()[1] for p in json.loads(shown.stdout)["pins"] if p["what"].startswith("stack ")]
    assert stacks == order


def test_verbose_shows_every_external_command_plan_runs():
    """plan asks cmake for its version (the kernel's job plan): -v shows it as it shows every command."""
    import shutil

    result = plan("-v")
    if shutil.which("cmake"):
        assert "cmake --version" in result.stderr, result.stderr
    assert all(line.startswith("$ ") for line in result.stderr.splitlines()), result.stderr


def test_a_section_into_a_pipe_is_wrapped_at_spaces_not_printed_as_lines_of_a_thousand_characters():
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = SRC
    text = subprocess.run([sys.executable, "-m", "blackwell_stack", "plan", "kernel"], capture_output=True, text=True,
                          env=env, timeout=300).stdout
    from blackwell_stack.cli.plan_text import PROSE_WIDTH

    long = [line for line in text.splitlines() if len(line) > PROSE_WIDTH and " " in line.strip()
            and not line.startswith("  $ ")]
    assert not long, long
