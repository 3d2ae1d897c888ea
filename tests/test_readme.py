"""The README stays true: the quick start reaches the main job first and alone; its tests are set up as CI runs them."""

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
    tests = _blocks("Tests")[-1]
    ci = [line.strip().replace(" --quiet", "") for line in (REPO / ".ci/run").read_text().splitlines()
          if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert tests == ci
    assert len(tests) == 3  # two set-up commands, one test command


def test_the_docs_index_lists_every_page_and_only_pages_that_exist():
    docs = REPO / "docs"
    linked = set(re.findall(r"\]\(([^)#/]+\.md)[)#]", (docs / "README.md").read_text()))
    pages = {path.name for path in docs.glob("*.md")} - {"README.md"}
    assert linked == pages, f"docs/README.md lacks {sorted(pages - linked)}, or names missing {sorted(linked - pages)}"


def test_the_readmes_links_reach_files_that_exist():
    for readme in (REPO / "README.md", REPO / "docs" / "README.md"):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme.read_text()):
            assert (readme.parent / target).exists(), f"{readme.relative_to(REPO)} links to {target}, which is missing"
