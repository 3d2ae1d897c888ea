"""Every data file of the project: where it lives, its shape, and the one way to load it.

The data (stacks, locks, pins, profiles, rules, flag tables, the kernel's
recipe, sources and test rules, the reference wheel, the flake's lock and provenance,
Nix's fixups, bench baselines) sits beside the Nix code that reads it.
`load(key, name)` reads a file (a regular file of at most
inputfiles.DATA_FILE_LIMIT bytes: a user may name one), parses it, checks its shape (schemas.py)
and the checks across its fields, then the loader's own `check` for what
the values mean; anything wrong is a DataError (exit 3) naming the file, the
entry and the field. Nothing reads a data file another way.

`read_by` says who reads each file: "cli" files are what the Nix package of
the CLI carries as its data (pkgs/blackwell-stack/data.nix; the tests hold
the two lists equal), "nix" files are read by Nix evaluation only.
"""

from __future__ import annotations

import contextlib
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackwell_stack import inputfiles
from blackwell_stack.data import schemas, shape
from blackwell_stack.errors import DataError, ExitCode, StackError
from blackwell_stack.paths import data_path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # data shipped inside the package (bench baselines)
Check = Callable[[Any, Path], None]
SYNTAX_HINT = "fix the syntax, or restore the file with `git checkout -- FILE`"


@dataclass(frozen=True)
class DataFile:
    key: str
    pattern: str  # relative to the data root; {name} is the part that varies (a stack, a profile, a version)
    what: str
    read_by: tuple[str, ...]  # "cli", "nix"
    shape: shape.Shape
    check: Check | None = None  # across fields, after the shape
    format: str = "json"  # json, toml or text
    in_package: bool = False  # shipped inside the Python package rather than beside the Nix code
    hint: str | None = None  # what to do about a file of the wrong shape

    def path(self, name: str | None = None) -> Path:
        rel = self.pattern.format(name=name)
        return PACKAGE_ROOT / rel if self.in_package else data_path(rel)

    def directory(self) -> Path:
        """The folder that holds the files of this kind (for kinds named by their file name)."""
        return self.path("_").parent

    def files(self) -> list[Path]:
        """Every file of this kind that is there now."""
        root = PACKAGE_ROOT if self.in_package else data_path()
        return sorted(p for p in root.glob(self.pattern.format(name="*")) if p.is_file())


FILES: tuple[DataFile, ...] = (
    DataFile("stack", "stacks/{name}/stack.json", "what a stack's lock cannot say (data/stack.py)",
             ("cli", "nix"), schemas.STACK),
    DataFile("lock", "stacks/{name}/uv.lock", "a stack's uv lock (data/lock.py)", ("cli", "nix"), schemas.LOCK,
             format="toml", hint="lock the stack again with its lock command (`blackwell-stack plan stack-NAME` names it)"),
    DataFile("stack-pyproject", "stacks/{name}/pyproject.toml", "what a stack's lock is made from", ("cli", "nix"),
             schemas.STACK_PYPROJECT, format="toml"),
    DataFile("audit", "stacks/{name}/wheels.json", "what a stack's locked wheels hold (`stack audit`)",
             ("cli", "nix"), schemas.AUDIT,
             hint="write it again with `blackwell-stack stack audit NAME --write`"),
    DataFile("profile", "modules/profiles/{name}.json", "a serving profile (data/profile.py)", ("cli", "nix"),
             schemas.PROFILE, hint="see modules/profiles/qwen3.5-397b-a17b-nvfp4-sm120.json"),
    DataFile("rules", "modules/rules.json", "the rules over a rendered service (serve/rules.py)", ("cli", "nix"),
             schemas.RULES, hint='each rule has an id, severity, message, source and versions, per runtime component '
             'the PEP 440 specifier sets it holds for ({"sglang": {"holds": ["==0.5.9"]}}; {} when none changes it)'),
    DataFile("flag-table", "modules/sglang-flags/{name}.json", "an SGLang version's flags (serve/flags.py)",
             ("cli", "nix"), schemas.FLAG_TABLE, schemas.check_flag_table,
             hint="regenerate the table with scripts/sglang-flags/flags_extract.py"),
    DataFile("recipe", "pkgs/sgl-kernel/recipe.json", "how sgl-kernel is configured (kernel/inputs/recipe.py)",
             ("cli", "nix"), schemas.RECIPE),
    DataFile("kernel-sources", "pkgs/sgl-kernel/sources.json", "sgl-kernel's sources by hash (kernel/inputs/sources.py)",
             ("cli", "nix"), schemas.KERNEL_SOURCES),
    DataFile("reference-wheel", "pkgs/sgl-kernel/reference-wheel.json", "the reference sgl-kernel wheel "
             "(kernel/reproducibility/reference.py)", ("cli",), schemas.REFERENCE_WHEEL, schemas.check_reference_wheel),
    DataFile("kernel-tests", "pkgs/sgl-kernel/kernel-tests.json", "which of upstream's kernel tests `kernel test` "
             "runs, and why it skips the others (kernel/test/selection.py)", ("cli",), schemas.KERNEL_TESTS,
             schemas.check_kernel_tests, hint="see pkgs/sgl-kernel/kernel-tests.json of the repository"),
    DataFile("kernel-check", "pkgs/sgl-kernel/{name}.py", "the project's own check of a built sgl-kernel on a GPU, "
             "run by `kernel test` and the derivation's gpuCheck (kernel/test/selection.py)", ("cli", "nix"), schemas.TEXT,
             format="text"),
    DataFile("patch", "patches/sgl-kernel/{name}.patch", "one change to sgl-kernel (kernel/inputs/patch_series.py)",
             ("cli", "nix"), schemas.TEXT, format="text"),
    DataFile("flake-lock", "flake.lock", "the flake's inputs, locked by Nix", ("cli", "nix"), schemas.FLAKE_LOCK,
             schemas.check_flake_lock, hint="lock again with `nix flake lock`, or restore it from the repository"),
    DataFile("flake-inputs", "nix/flake-inputs.json", "where each narHash of flake.lock came from", ("cli",),
             schemas.FLAKE_INPUTS, hint="restore it from the repository"),
    DataFile("nixpkgs-config", "nix/nixpkgs-config.json", "the nixpkgs config the flake builds with", ("nix",),
             schemas.NIX_ONLY),
    DataFile("wheel-libraries", "nix/fixups/wheel-libraries.json", "libraries the wheels need from elsewhere",
             ("nix",), schemas.NIX_ONLY),
    DataFile("env-collisions", "nix/fixups/env-collisions.json", "files two wheels share", ("nix",),
             schemas.NIX_ONLY),
    DataFile("baseline", "verify/baselines/{name}.json", "figures a bench result is compared with "
             "(verify/baseline.py)", ("cli",), schemas.BASELINE, in_package=True),
    DataFile("startup-imports", "doctor/startup-imports.json", "what SGLang imports while it starts, per version "
             "(doctor/startup.py)", ("cli",), schemas.STARTUP_IMPORTS, in_package=True,
             hint="restore it from the repository"),
    DataFile("failure-text", "verify/failure-text.json", "the reference deployment's failure text, which smoke "
             "and bench look for in every answer (verify/degeneracy.py)", ("cli",), schemas.FAILURE_TEXT,
             in_package=True, hint="restore it from the repository"),
    DataFile("gsm8k", "verify/gsm8k.json", "the GSM8K files the accuracy gate reads, by URL and sha256, and its "
             "pass mark per profile with its source (verify/gsm8k_data.py)", ("cli",), schemas.GSM8K,
             in_package=True, hint="restore it from the repository"),
)

BY_KEY = {f.key: f for f in FILES}


def entry(key: str) -> DataFile:
    return BY_KEY[key]


def path(key: str, name: str | None = None) -> Path:
    """Where the data file `key` (of `name`, for the kinds that have one) lives."""
    return BY_KEY[key].path(name)


def parse(key: str, file: Path, raw: bytes, check: Check | None = None, hint: str | None = None) -> Any:
    """The data of `raw` (the bytes of `file`), checked as the registry says and then by `check`.

    hint replaces the registry's hint for a file of this kind that cannot be read (one that names the stack).
    """
    kind = BY_KEY[key]
    hint = hint or kind.hint
    parsers: dict[str, Callable[[str], Any]] = {"text": str, "toml": tomllib.loads, "json": json.loads}
    try:
        data = parsers[kind.format](raw.decode())
    except UnicodeDecodeError as exc:
        raise DataError(file, None, None, f"not UTF-8 text ({exc.reason})", hint or SYNTAX_HINT) from None
    except tomllib.TOMLDecodeError as exc:
        raise DataError(file, None, None, f"not valid TOML ({exc})", hint or SYNTAX_HINT) from None
    except json.JSONDecodeError as exc:
        raise DataError(file, None, None, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                        hint or SYNTAX_HINT) from None
    shape.check(kind.shape, data, file, hint)
    if kind.check is not None:
        kind.check(data, file)
    if check is not None:
        check(data, file)
    return data


def load(key: str, name: str | None = None, *, file: str | Path | None = None, check: Check | None = None,
         missing: StackError | None = None, hint: str | None = None) -> Any:
    """The data file `key` (of `name`, or at `file`), parsed and checked; `missing` is raised when it is not
    there (default: a DataError saying to restore it)."""
    target = Path(file) if file is not None else path(key, name)
    try:
        raw = inputfiles.read_bytes(target, limit=inputfiles.DATA_FILE_LIMIT)
    except FileNotFoundError:
        raise missing or DataError(target, None, None, "is missing", "restore it from the repository") from None
    except IsADirectoryError:
        raise DataError(target, None, None, "is a directory, not a file", "restore it from the repository") from None
    try:
        return parse(key, target, raw, check, hint)
    except DataError as exc:
        if not _project_file(target):  # a user's own file (--profile /etc/passwd): a bad input, exit 2
            exc.code = ExitCode.USAGE
        raise


def _project_file(target: Path) -> bool:
    """Whether target is one of the project's own data files (the checkout's or the package's), not a user's."""
    roots = [PACKAGE_ROOT]
    with contextlib.suppress(StackError):
        roots.append(data_path())
    try:
        resolved = target.resolve()
        return any(resolved.is_relative_to(root.resolve()) for root in roots)
    except OSError:
        return False
