"""The README's quick start stays true: the main job first and alone, the tests' set-up as CI runs it."""

from __future__ import annotations

import re

from conftest import REPO


def _blocks(section: str) -> list[list[str]]:
    """The shell commands of each ```sh block of a README section, comments dropped."""
    text = (REPO / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [[line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]
            for block in re.findall(r"```sh\n(.*?)```", body, re.S)]


def test_the_quick_start_reaches_the_main_job_with_one_install():
    first, *_ = _blocks("Quick start")
    assert first == ["python3 -m pip install -e .", "blackwell-stack plan"]


def test_the_readme_tests_are_what_ci_runs():
    tests = _blocks("Quick start")[-1]
    ci = [line.strip().replace(" --quiet", "") for line in (REPO / ".ci/run").read_text().splitlines()
          if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert tests == ci
    assert len(tests) == 3  # two set-up commands, one test command
