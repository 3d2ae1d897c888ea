"""Dry-run and idempotent application of the sgl-kernel patch series, hunk by hunk, with GNU patch.

GNU patch is what Nix applies the series with (the derivation's `patches`). Here it runs without fuzz (`-F0`), so a
hunk that would apply only fuzzily is a conflict. Each patch is tried, in order, on a copy of the files the series
touches, as they are after the patches before it; each hunk is
- applied: it applies in reverse (its new text is there) and not forward;
- applicable: it applies forward, so it would apply;
- conflicting: neither; the report shows the nearest upstream text.
A hunk that applies both ways (its old and its new text are both there) is what is nearer its line. The patches are
relative to sgl-kernel/ (the derivation's sourceRoot); a checkout is either an sglang tree or its sgl-kernel directory.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from blackwell_stack import inputfiles, proc
from blackwell_stack.data import registry
from blackwell_stack.errors import BuildError, DataError, StackError, ToolchainError
from blackwell_stack.fileio import atomic_write_bytes

APPLIED, APPLICABLE, CONFLICTING = "applied", "applicable", "conflicting"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# GNU patch's report, in the C locale: a file section starts with "checking file X" (a dry run) or
# "patching file X"; each hunk says "Hunk #N succeeded at L (offset K lines)." or "FAILED at L" or "ignored at L".
_REPORT_FILE = re.compile(r"^(?:checking|patching) file (.+)$")
_REPORT_HUNK = re.compile(r"^Hunk #(\d+) (succeeded|FAILED|ignored) at (\d+)(?: \(offset (-?\d+) lines?\))?")
_GNU_PATCH_FLAGS = ("-p1", "-F0", "--force", "--verbose", "--no-backup-if-mismatch", "--reject-file=-")


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
    """Its files and hunks, for the report; text before the first `diff`/`---` is its description."""
    lines = inputfiles.read_text(path, limit=inputfiles.TEXT_FILE_LIMIT, what="patch").splitlines()
    i = next((n for n, line in enumerate(lines) if line.startswith(("diff --git ", "--- "))), len(lines))
    description = lines[:i]
    files: list[FilePatch] = []
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
                if tag not in " -+\\":
                    raise DataError(path, None, None, f"line {i + 1}: unexpected {body!r} inside {hunk.header}")
                if tag in " -":
                    hunk.old.append(text)
                if tag in " +":
                    hunk.new.append(text)
                i += 1
            if len(hunk.old) != old_len or len(hunk.new) != new_len:
                raise DataError(path, None, None, f"{hunk.header}: hunk is shorter than its header says")
            current.hunks.append(hunk)
            continue
        i += 1
    if not files:
        raise DataError(path, None, None, "no file changes found (not a unified diff?)")
    return Patch(path.stem, path, "\n".join(description).strip(), files)


def load_series() -> list[Patch]:
    directory = registry.entry("patch").directory()
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


GNU_PATCH_FIX = "install GNU patch (apt-get install patch): it applies the series here as in Nix"


def gnu_patch() -> tuple[str, str]:
    """GNU patch on PATH and its version line; a ToolchainError when there is none, or another patch (busybox's,
    BSD's) whose report this does not read."""
    path = proc.require("patch", GNU_PATCH_FIX)
    return path, _gnu_version(path)


@functools.cache
def _gnu_version(path: str) -> str:
    code, out = proc.probe([path, "--version"], env=_environment())
    first = out.splitlines()[0] if out else f"exit code {code}"
    if code != 0 or not first.startswith("GNU patch"):
        raise ToolchainError(f"{path} is not GNU patch ({first})", GNU_PATCH_FIX)
    return first


def _environment() -> dict[str, str]:
    """The caller's environment (TMPDIR among it: patch writes its temporary files there), with the report in
    the C locale and its file names unquoted (QUOTING_STYLE would quote them), and no POSIX mode."""
    env = {k: v for k, v in os.environ.items() if k != "POSIXLY_CORRECT"}
    return {**env, "LC_ALL": "C", "QUOTING_STYLE": "literal"}


def _gnu_patch(patch: Patch, work: Path, *flags: str) -> dict[tuple[str, int], tuple[int, int] | None]:
    """(file, hunk) -> (line, offset) where GNU patch put it, or None where it did not apply."""
    binary, _ = gnu_patch()
    result = proc.run([binary, *_GNU_PATCH_FLAGS, *flags, "-d", work, "-i", patch.path.resolve()], check=False,
                      env=_environment(), timeout=120)
    outcomes: dict[tuple[str, int], tuple[int, int] | None] = {}
    file = ""
    for line in result.stdout.splitlines():
        if m := _REPORT_FILE.match(line):
            file = m.group(1)
        elif m := _REPORT_HUNK.match(line):
            succeeded = m.group(2) == "succeeded"
            outcomes[(file, int(m.group(1)))] = (int(m.group(3)), int(m.group(4) or 0)) if succeeded else None
    return outcomes


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


def _read(path: Path) -> bytes | None:
    return inputfiles.read_bytes(path, limit=inputfiles.TEXT_FILE_LIMIT) if path.is_file() else None


def _check_patch(patch: Patch, work: Path) -> list[HunkResult]:
    forward, reverse = _gnu_patch(patch, work, "--dry-run"), _gnu_patch(patch, work, "--dry-run", "--reverse")
    results = []
    for fp in patch.files:
        text = _read(work / fp.path)
        for h in fp.hunks:
            ahead, back = forward.get((fp.path, h.index)), reverse.get((fp.path, h.index))
            # An empty text (a hunk that only deletes, or only inserts, with no context) matches anywhere,
            # so it is no evidence: the other direction decides.
            if ahead and not h.new:
                back = None
            if back and not h.old:
                ahead = None
            result = functools.partial(HunkResult, patch.name, fp.path, h.index, h.header)
            if ahead and (back is None or abs(ahead[1]) < abs(back[1])):
                results.append(result(APPLICABLE, *ahead))
            elif back:
                # Reversed, GNU patch counts lines as in the file without the hunk; where its new text is now:
                results.append(result(APPLIED, h.new_start + back[1], back[1]))
            elif text is None:
                results.append(result(CONFLICTING, expected=h.old, upstream_now=["(file is missing)"]))
            else:
                start, now = _nearest_text(text.decode(errors="replace").splitlines(), h.old, h.old_start - 1)
                results.append(result(CONFLICTING, start + 1, upstream_now=now, expected=h.old))
    if any(r.state == APPLICABLE for r in results):
        # The patches after it see its applicable hunks applied (the others are dropped: --reject-file=-).
        _gnu_patch(patch, work)
    return results


@dataclass
class SeriesReport:
    kernel_dir: Path
    hunks: list[HunkResult]
    new_texts: dict[str, bytes | None]  # file -> its bytes after every applicable hunk

    def patch_states(self) -> dict[str, str]:
        """Per patch: applied, applicable, conflicting, or partly-applied (a mix of applied and applicable)."""
        seen: dict[str, set[str]] = {}
        for r in self.hunks:
            seen.setdefault(r.patch, set()).add(r.state)
        return {name: CONFLICTING if CONFLICTING in states else "partly-applied" if len(states) > 1 else states.pop()
                for name, states in seen.items()}

    @property
    def ok(self) -> bool:
        return all(s in (APPLIED, APPLICABLE) for s in self.patch_states().values())

    def error(self) -> BuildError | None:
        """Why the series cannot be applied (each conflict, or the patches half applied); None when it can."""
        if self.ok:
            return None
        conflicts = [conflict_message(r) for r in self.hunks if r.state == CONFLICTING]
        partial = [name for name, s in self.patch_states().items() if s == "partly-applied"]
        return BuildError(
            f"the sgl-kernel patch series does not apply to {self.kernel_dir}:\n"
            + ("\n".join(conflicts) if conflicts else f"partly applied: {', '.join(partial)}"),
            "check out the pinned source (sglang v0.5.9) afresh, e.g. `git -C SRC checkout -- sgl-kernel`; "
            "`blackwell-stack kernel patches check --src SRC` shows every hunk",
        )

    def to_json(self) -> dict:
        return {"kernel_dir": str(self.kernel_dir), "patches": self.patch_states(),
                "hunks": [r.to_json() for r in self.hunks]}


def check_series(src: str | Path, patches: list[Patch] | None = None) -> SeriesReport:
    """Classify every hunk of the series in order, as if each earlier applicable hunk had been applied."""
    kdir = kernel_dir(src)
    patches = patches if patches is not None else load_series()
    files = sorted({fp.old_path or fp.path for p in patches for fp in p.files})
    with tempfile.TemporaryDirectory(prefix="blackwell-stack-patches-") as tmp:
        work = Path(tmp)
        for rel in files:
            if (data := _read(kdir / rel)) is not None:
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / rel).write_bytes(data)
        results = [r for patch in patches for r in _check_patch(patch, work)]
        new_texts = {rel: _read(work / rel) for rel in sorted({fp.path for p in patches for fp in p.files})}
    return SeriesReport(kdir, results, new_texts)


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
    if error := report.error():
        raise error
    for rel, data in report.new_texts.items():
        target = report.kernel_dir / rel
        if data is None:
            target.unlink(missing_ok=True)
        elif _read(target) != data:
            atomic_write_bytes(target, data)
    return report, [name for name, s in report.patch_states().items() if s == APPLICABLE]
