"""The project stands on its own: its citations resolve inside it, and nothing points at one machine.

Every `docs/<page>.md#<anchor>` cited anywhere must name a heading of that
page (GitHub's anchor rules). No file may cite a notebook outside the
project or a path of a particular machine.
"""

from __future__ import annotations

import re

from support import REPO

SKIP_DIRS = {".git", ".pytest_cache", ".hypothesis", ".mypy_cache", "__pycache__", ".venv", ".dev", "result", "dist", "build"}
# Built from pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join([r"\bFA" + r"CTS\b", r"\.\./sha" + "red", "/wo" + "rk/", r"\.mir" + r"ror\b"]))
CITATION = re.compile(r"docs/([\w.-]+\.md)#([\w-]+)")


def text_files():
    for path in sorted(REPO.rglob("*")):
        rel = path.relative_to(REPO)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        try:
            yield rel.as_posix(), path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary (a plot, a wheel)


def github_anchors(markdown: str) -> set[str]:
    anchors = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        anchors.add(re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-"))
    return anchors


def test_every_docs_anchor_that_is_cited_exists():
    cited = [(rel, page, anchor) for rel, text in text_files() for page, anchor in CITATION.findall(text)]
    assert cited, "the data cites docs/reference-deployment.md"
    missing = []
    for rel, page, anchor in cited:
        doc = REPO / "docs" / page
        if not doc.is_file() or anchor not in github_anchors(doc.read_text()):
            missing.append(f"{rel}: docs/{page}#{anchor}")
    assert not missing, "citations of sections that do not exist:\n" + "\n".join(missing)


def test_nothing_cites_outside_the_project_or_a_machine_path():
    offenders = []
    for rel, text in text_files():
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{rel}:{number}: {line.strip()[:120]}")
    assert not offenders, "cite docs/ or the upstream issue instead:\n" + "\n".join(offenders)


def test_the_reference_deployment_page_has_its_stable_sections():
    anchors = github_anchors((REPO / "docs" / "reference-deployment.md").read_text())
    for anchor in ("target", "versions", "server-flags", "kv-cache-dtype", "fp4-gemm-backend", "custom-all-reduce",
                   "environment", "results", "failures-and-fixes", "sgl-kernel-from-source", "kernel-abi",
                   "pytorch-nightly-wheels", "not-measured-here"):
        assert anchor in anchors, anchor
