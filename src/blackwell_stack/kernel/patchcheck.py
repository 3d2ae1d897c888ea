"""Dry-run and idempotent application of the sgl-kernel patch series, hunk by hunk.

Pure Python (no GNU patch): a unified-diff parser and an exact context match
that allows an offset but no fuzz, like `patch -p1 -F0`. Each hunk of the
series is classified against the tree as it would be after the patches before
it:
- applied: its new text is there (and its old text is not, nearer the spot);
- applicable: its old text is there, so it would apply;
- conflicting: neither is; the report shows the nearest upstream text.
The patches are relative to sgl-kernel/ (the derivation's sourceRoot); a
checkout is either an sglang tree or its sgl-kernel directory.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import inputfiles
from blackwell_stack.errors import BuildError, DataError, StackError
from blackwell_stack.fileio import atomic_write_bytes
from blackwell_stack.model import registry

APPLIED, APPLICABLE, CONFLICTING = "applied", "applicable", "conflicting"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    index: int  # 1-based within its file section
    old_start: int
    new_start: int
    header: str
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    old_path: str | None  # None for a new file (/dev/null)
    new_path: str | None  # None for a deleted file
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


@dataclass
class Patch:
    name: str
    path: Path
    description: str
    files: list[FilePatch]


@dataclass
class HunkResult:
    patch: str
    file: str
    hunk: int
    header: str
    state: str
    line: int | None = None  # 1-based line where it matched (or the nearest text starts)
    offset: int = 0
    upstream_now: list[str] = field(default_factory=list)  # for conflicts: the nearest text in the tree
    expected: list[str] = field(default_factory=list)  # for conflicts: what the patch expects there

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, []) or k == "state"}


def _strip_prefix(path: str) -> str | None:
    path = path.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    return path.split("/", 1)[1] if "/" in path else path  # -p1


def parse_patch(path: Path) -> Patch:
    """Parse a git-style unified diff; text before the first `diff`/`---` is its description."""
    lines = inputfiles.read_text(path, limit=inputfiles.TEXT_FILE_LIMIT, what="patch").splitlines()
    description: list[str] = []
    files: list[FilePatch] = []
    i = 0
    while i < len(lines) and not lines[i].startswith(("diff --git ", "--- ")):
        description.append(lines[i])
        i += 1
    current: FilePatch | None = None
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            current = FilePatch(_strip_prefix(line[4:]), _strip_prefix(lines[i + 1][4:]))
            files.append(current)
            i += 2
            continue
        m = _HUNK.match(line)
        if m:
            if current is None:
                raise DataError(path, None, None, f"line {i + 1}: hunk before any ---/+++ file header")
            old_len = int(m.group(2)) if m.group(2) is not None else 1
            new_len = int(m.group(4)) if m.group(4) is not None else 1
            hunk = Hunk(len(current.hunks) + 1, int(m.group(1)), int(m.group(3)), line)
            i += 1
            while i < len(lines) and (len(hunk.old) < old_len or len(hunk.new) < new_len):
                body = lines[i]
                tag, text = (body[:1], body[1:]) if body else (" ", "")
                if tag == " ":
                    hunk.old.append(text)
                    hunk.new.append(text)
                elif tag == "-":
                    hunk.old.append(text)
                elif tag == "+":
                    hunk.new.append(text)
                elif tag == "\\":
                    pass  # "\ No newline at end of file"
                else:
                    raise DataError(path, None, None, f"line {i + 1}: unexpected {body!r} inside {hunk.header}")
                i += 1
            if len(hunk.old) != old_len or len(hunk.new) != new_len:
                raise DataError(path, None, None, f"{hunk.header}: hunk is shorter than its header says")
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
            current.hunks.append(hunk)
            continue
        i += 1
    if not files:
        raise DataError(path, None, None, "no file changes found (not a unified diff?)")
    return Patch(path.stem, path, "\n".join(description).strip(), files)


def series_dir() -> Path:
    return registry.entry("patch").directory()


def load_series(directory: Path | None = None) -> list[Patch]:
    directory = directory or series_dir()
    paths = sorted(directory.glob("[0-9][0-9][0-9][0-9]-*.patch"))
    if not paths:
        raise DataError(directory, None, None, "no NNNN-*.patch files", "restore patches/sgl-kernel from the repository")
    return [parse_patch(p) for p in paths]


def kernel_dir(src: str | Path) -> Path:
    """The sgl-kernel directory of a checkout given as the sglang tree or as sgl-kernel itself."""
    src = Path(src).expanduser()
    if not src.is_dir():
        raise StackError(f"--src {src} is not a directory", "pass an sglang checkout or its sgl-kernel directory")
    for candidate in (src / "sgl-kernel", src):
        if (candidate / "CMakeLists.txt").is_file() and (candidate / "python" / "sgl_kernel").is_dir():
            return candidate
    raise StackError(
        f"--src {src} is neither an sglang checkout nor its sgl-kernel directory "
        "(no sgl-kernel/CMakeLists.txt and python/sgl_kernel/)",
        "clone https://github.com/sgl-project/sglang at tag v0.5.9 and pass that directory",
    )


def _find(lines: list[str], block: list[str], near: int) -> int | None:
    """0-based start of `block` in `lines` nearest to `near`, or None."""
    if not block:
        return max(0, min(near, len(lines)))
    n, first = len(block), block[0]
    best = None
    for start in range(len(lines) - n + 1):
        matches = lines[start] == first and lines[start : start + n] == block
        if matches and (best is None or abs(start - near) < abs(best - near)):
            best = start
    return best


def _nearest_text(lines: list[str], block: list[str], near: int) -> tuple[int, list[str]]:
    """Where the tree looks most like `block` (most equal lines at the same offsets), ties nearest `near`."""
    n = max(1, len(block))
    best_start, best_score = max(0, min(near, max(0, len(lines) - n))), -1
    for start in range(max(1, len(lines) - n + 1)):
        window = lines[start : start + n]
        score = sum(1 for a, b in zip(window, block) if a == b)
        if score > best_score or (score == best_score and abs(start - near) < abs(best_start - near)):
            best_start, best_score = start, score
    return best_start, lines[best_start : best_start + n]


def _classify(lines: list[str], hunk: Hunk, delta: int) -> tuple[str, int | None]:
    """State of one hunk in `lines`, and the 0-based start where its old (applicable) or new (applied) text is."""
    near_old = max(0, hunk.old_start - 1 + delta)
    near_new = max(0, hunk.new_start - 1)
    # An empty block (a hunk that deletes everything it touches, or inserts into an empty file)
    # matches anywhere, so it is no evidence: decide by the other block alone.
    if not hunk.new:
        at_old = _find(lines, hunk.old, near_old)
        return (APPLICABLE, at_old) if at_old is not None else (APPLIED, min(near_new, len(lines)))
    if not hunk.old:
        at_new = _find(lines, hunk.new, near_new)
        return (APPLIED, at_new) if at_new is not None else (APPLICABLE, min(near_old, len(lines)))
    at_old = _find(lines, hunk.old, near_old) if hunk.old != hunk.new else None
    at_new = _find(lines, hunk.new, near_new)
    if at_old is not None and at_new is not None:
        # Both texts exist. One inside the other is one text seen twice: a deletion's new text
        # (its context) sits inside its old text, an insertion's old text inside its new one.
        if at_old <= at_new and at_new + len(hunk.new) <= at_old + len(hunk.old):
            return APPLICABLE, at_old
        if at_new <= at_old and at_old + len(hunk.old) <= at_new + len(hunk.new):
            return APPLIED, at_new
        # Otherwise the texts are in different places: trust the one nearer the hunk's line.
        if abs(at_new - near_new) <= abs(at_old - near_old):
            return APPLIED, at_new
        return APPLICABLE, at_old
    if at_new is not None:
        return APPLIED, at_new
    if at_old is not None:
        return APPLICABLE, at_old
    return CONFLICTING, None


def check_file(patch: Patch, fp: FilePatch, text: str | None) -> tuple[list[HunkResult], str | None]:
    """Results for one file section, and the file's text after applying every applicable hunk."""
    results: list[HunkResult] = []
    if fp.old_path is None:  # a new file
        new_text = "\n".join(fp.hunks[0].new) + "\n" if fp.hunks else ""
        if text is None:
            state = APPLICABLE
        elif text == new_text:
            state = APPLIED
        else:
            state = CONFLICTING
        r = HunkResult(patch.name, fp.path, 1, "new file", state)
        if state == CONFLICTING and text is not None:
            r.upstream_now, r.expected = text.splitlines()[:20], new_text.splitlines()[:20]
        return [r], new_text if state != CONFLICTING else text
    if text is None:
        return [
            HunkResult(patch.name, fp.path, h.index, h.header, CONFLICTING, expected=h.old, upstream_now=["(file is missing)"])
            for h in fp.hunks
        ], None
    trailing_newline = text.endswith("\n")
    lines = text.splitlines()
    delta = 0  # where the next hunk's old text is expected, relative to its old line number
    grown = 0  # lines the hunks before this one added (or removed) in `lines`
    for h in fp.hunks:
        state, at = _classify(lines, h, delta)
        if state == APPLICABLE and at is not None:
            # Reported like GNU patch: the distance from the hunk's line in the original file.
            offset = at - (h.old_start - 1) - grown
            lines[at : at + len(h.old)] = h.new
            results.append(HunkResult(patch.name, fp.path, h.index, h.header, state, at + 1, offset))
        elif state == APPLIED and at is not None:
            results.append(HunkResult(patch.name, fp.path, h.index, h.header, state, at + 1, at - (h.new_start - 1)))
        else:
            start, now = _nearest_text(lines, h.old, h.old_start - 1 + delta)
            results.append(
                HunkResult(patch.name, fp.path, h.index, h.header, state, start + 1, upstream_now=now, expected=h.old)
            )
        if at is not None:
            grown += len(h.new) - len(h.old)
            delta = at - (h.old_start - 1) + len(h.new) - len(h.old)
    if fp.new_path is None:  # deletion
        return results, None
    return results, "\n".join(lines) + ("\n" if trailing_newline or not lines else "")


@dataclass
class SeriesReport:
    kernel_dir: Path
    hunks: list[HunkResult]
    new_texts: dict[str, str | None]  # file -> text after applying every applicable hunk

    def patch_states(self) -> dict[str, str]:
        """Per patch: applied, applicable, conflicting, or partly-applied (a mix of applied and applicable)."""
        out: dict[str, set[str]] = {}
        for r in self.hunks:
            out.setdefault(r.patch, set()).add(r.state)
        states = {}
        for name, seen in out.items():
            if CONFLICTING in seen:
                states[name] = CONFLICTING
            elif seen == {APPLIED}:
                states[name] = APPLIED
            elif seen == {APPLICABLE}:
                states[name] = APPLICABLE
            else:
                states[name] = "partly-applied"
        return states

    @property
    def ok(self) -> bool:
        return all(s in (APPLIED, APPLICABLE) for s in self.patch_states().values())

    def to_json(self) -> dict:
        return {
            "kernel_dir": str(self.kernel_dir),
            "patches": self.patch_states(),
            "hunks": [r.to_json() for r in self.hunks],
        }


def check_series(src: str | Path, patches: list[Patch] | None = None) -> SeriesReport:
    """Classify every hunk of the series in order, as if each earlier applicable hunk had been applied."""
    kdir = kernel_dir(src)
    patches = patches if patches is not None else load_series()
    texts: dict[str, str | None] = {}
    results: list[HunkResult] = []
    for patch in patches:
        for fp in patch.files:
            if fp.path not in texts:
                f = kdir / (fp.old_path or fp.path)
                texts[fp.path] = inputfiles.read_text(f, limit=inputfiles.TEXT_FILE_LIMIT) if f.is_file() else None
            hunk_results, after = check_file(patch, fp, texts[fp.path])
            results.extend(hunk_results)
            texts[fp.path] = after
    return SeriesReport(kdir, results, texts)


def conflict_message(r: HunkResult) -> str:
    if r.line is None:
        return f"{r.patch}: {r.file} hunk {r.hunk} ({r.header}) cannot apply: the file is missing from the checkout"
    diff = difflib.unified_diff(r.expected, r.upstream_now, "patch expects", "upstream has now", lineterm="", n=1)
    return (
        f"{r.patch}: {r.file} hunk {r.hunk} ({r.header}) does not apply; nearest text is at line {r.line}:\n"
        + "\n".join("    " + line for line in diff)
    )


def apply_series(src: str | Path, patches: list[Patch] | None = None) -> tuple[SeriesReport, list[str]]:
    """Apply what is not applied yet; refuse (changing nothing) on any conflict or half-applied patch.

    Returns the report and the names of the patches it applied.
    """
    report = check_series(src, patches)
    states = report.patch_states()
    bad = [name for name, s in states.items() if s not in (APPLIED, APPLICABLE)]
    if bad:
        conflicts = [conflict_message(r) for r in report.hunks if r.state == CONFLICTING]
        partial = [n for n in bad if states[n] == "partly-applied"]
        detail = "\n".join(conflicts) if conflicts else f"partly applied: {', '.join(partial)}"
        raise BuildError(
            f"the sgl-kernel patch series does not apply to {report.kernel_dir}:\n{detail}",
            "check out the pinned source (sglang v0.5.9) afresh, e.g. `git -C SRC checkout -- sgl-kernel`; "
            "`blackwell-stack kernel patches check --src SRC` shows every hunk",
        )
    applied_now = [name for name, s in states.items() if s == APPLICABLE]
    touched = {r.file for r in report.hunks if r.state == APPLICABLE}
    for rel in sorted(touched):
        target = report.kernel_dir / rel
        text = report.new_texts.get(rel)
        if text is None:
            target.unlink(missing_ok=True)
        else:
            atomic_write_bytes(target, text.encode())
    return report, applied_now
