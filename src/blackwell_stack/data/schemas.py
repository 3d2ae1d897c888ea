"""The shapes of the data files (data/shape.py), one per kind of file, and the checks across their fields.

What a file must hold to be read at all lives here; what its values mean
(a stack's kernel, a recipe's memory rule, a rule's versions) is checked by
the loader that gives them meaning, after the shape (data/registry.py runs
both). Files whose whole validation predates the registry keep it in their
loader and have a shape here that says only what those loaders rely on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blackwell_stack.data.plan import HASH_CHECKS
from blackwell_stack.data.shape import (
    AnyValue,
    Bool,
    Either,
    Int,
    ListOf,
    Literal,
    Map,
    Num,
    Obj,
    Opt,
    Shape,
    Str,
    Tagged,
)
from blackwell_stack.errors import DataError

SHA256 = Str(pattern=r"[0-9a-f]{64}")
_SRI = Str(pattern=r"sha256-[A-Za-z0-9+/]{43}=", means="a sha256 SRI hash (sha256-<base64>)")
NAMES = ListOf(Str(nonempty=True))


# stacks/<name>/stack.json (docs/stacks.md); data/stack.py checks that it names its own directory.
_TEXT = Str(nonempty=True)
STACK = Obj({
    "schema_version": Literal((1,)), "name": _TEXT, "description": _TEXT, "audience": _TEXT, "system": _TEXT,
    "python": _TEXT, "uv": _TEXT, "default": Bool(),
    "versions_from_lock": Obj(dict.fromkeys(("sglang", "flashinfer", "torch"), _TEXT)),
    "kernel": Either((Obj({"package": _TEXT, "from": Literal(("source",)), "version": _TEXT}),
                      Obj({"package": _TEXT, "from": Literal(("lock",))}))),
    "torch_pairs": Map(Obj({"check": Literal(("metadata", "symbols", "source", "lock", "unpaired")), "why": _TEXT})),
    "profiles": ListOf(_TEXT, nonempty=True),
    "lock": Obj({"command": _TEXT, "missing_reason": Opt(Str())}),
}, optional={"kept_wheels": Obj({"url_template": _TEXT})})

# stacks/<name>/uv.lock; data/lock.py says which format version it reads.
LOCK = Obj({"version": AnyValue()}, optional={
    "package": ListOf(Obj({"name": Str(nonempty=True)}, optional={
        "version": Str(),
        "source": Map(AnyValue()),
        "wheels": ListOf(Obj({}, optional={"url": Str(), "path": Str(), "hash": Str(), "size": Int(minimum=0)})),
        "sdist": Obj({}, optional={"url": Str(), "path": Str(), "hash": Str(), "size": Int(minimum=0)}),
        "dependencies": ListOf(Obj({"name": Str(nonempty=True)}, optional={"extra": NAMES})),
        "optional-dependencies": Map(ListOf(Obj({"name": Str(nonempty=True)}))),
    })),
    "manifest": Obj({}, optional={
        "excludes": ListOf(Str()),
        "overrides": ListOf(Obj({"name": Str(nonempty=True)}, optional={"specifier": Str()})),
    }),
})

# stacks/<name>/pyproject.toml: `stack lock` reads which indexes it names.
STACK_PYPROJECT = Obj({"project": Obj({"name": Str(nonempty=True)})}, optional={
    "tool": Obj({}, optional={"uv": Obj({}, optional={"index": ListOf(Obj({}, optional={"url": Str()}))})}),
})

# stacks/<name>/wheels.json: written by `stack audit --write`, read by plan, pins show and Nix's fixups.
AUDIT = Obj({
    "schema_version": Literal((1,)),
    "lock_sha256": SHA256,
    "target": Obj({"system": Str(nonempty=True), "python": Str(nonempty=True), "glibc": Str(nonempty=True)}),
    "files": Map(Obj({"file": Str(nonempty=True), "sha256": SHA256, "checked": Str()})),
    "choices": Map(Str(nonempty=True)),
    "kept_wheels": Map(Obj({"file": Str(nonempty=True), "hash": Opt(Str())})),
    "libraries": Map(Obj({
        "file": Str(), "elf_files": Int(minimum=0), "executables": ListOf(Str()), "dlopen_notes": ListOf(Str()),
        "driver_names": ListOf(Literal(("libcuda.so.1", "libnvidia-ml.so.1"))), "origin_runpaths": ListOf(Str()),
        "needs": Map(Either((Literal(("system", "driver", "missing")),
                             Obj({"from": NAMES, "dependency": Bool()})))),
    })),
    "driver_by_name": Map(Map(NAMES, nonempty=True)),
    "collisions": ListOf(Obj({"path": Str(), "packages": NAMES, "identical": Bool(), "elf": Bool()})),
    "torch_pairs": Obj({
        "torch": Opt(Str()),
        "pairs": Map(Obj({"check": Str(nonempty=True), "ok": Bool(), "found": Str()},
                         optional={"version": Opt(Str()), "needed": Int(minimum=0), "missing": ListOf(Str())})),
        "unlisted": ListOf(Str()),
    }),
})

# modules/profiles/<name>.json; data/profile.py checks across fields (its runtime's versions, what a verified
# entry must say).
_SAID = {"value": AnyValue(), "reason": _TEXT, "source": _TEXT}
_VERIFIED = {"verified": Bool(), "verified_by": _TEXT, "unverified_reason": _TEXT}
PROFILE = Obj({
    "name": _TEXT,
    "model": Obj({"id": _TEXT, "revision": Opt(_TEXT), "kv_cache_scales_calibrated": Bool(), "uses_mla": Bool()}),
    "hardware": Obj({"gpus": Int(minimum=1), "compute_capability": _TEXT, "interconnect": _TEXT}),
    "runtime": Obj({"sglang": _TEXT, "flashinfer": Opt(_TEXT)}),
    "service": Obj({"host": _TEXT, "port": Int(minimum=1)}),
    "flags": Map(Obj(_SAID, optional=_VERIFIED), keys=r"--.+", means="a flag written with its dashes, --name"),
    "env": Map(Obj({**_SAID, "value": Str()}, optional=_VERIFIED)),
}, optional={"stacks": NAMES})


# modules/rules.json (serve/rules.py reads the conditions); data/profile.py `load_rules` checks across fields:
# one of condition or check, unique ids, the versions as PEP 440 specifier sets.
_RULE_VERSIONS = Obj({"holds": ListOf(_TEXT, nonempty=True)}, optional={"not": ListOf(_TEXT)})
RULES = Obj({"rules": ListOf(Obj({
    "id": _TEXT, "severity": Literal(("error", "warning")), "message": _TEXT, "source": _TEXT,
    "versions": Map(_RULE_VERSIONS, keys="sglang|flashinfer", means="a runtime component: sglang or flashinfer"),
}, optional={"condition": AnyValue(), "check": _TEXT, "option": _TEXT}), key="id")}, optional={"constants": Map(AnyValue())})

# modules/sglang-flags/<version>.json: written by scripts/sglang-flags/flags_extract.py.
FLAG_TABLE = Obj({
    "sglang_version": Str(nonempty=True),
    "wheel": Obj({"filename": Str(nonempty=True), "sha256": SHA256}),
    "flags": Map(Obj({
        "dest": Str(nonempty=True), "aliases": NAMES, "action": Str(), "type": Opt(Str()), "negations": NAMES,
        "takes_value": Literal(("none", "one", "optional", "many")), "choices": Opt(ListOf(AnyValue())),
    }), nonempty=True),
    "options": Map(Str(nonempty=True), nonempty=True),
    "abbreviations": Map(Str(nonempty=True)),
    "ambiguous": Map(NAMES),
    "negated": Map(Str(nonempty=True)),
})


def check_flag_table(data: dict[str, Any], path: Path) -> None:
    """Every spelling the table decides about leads to one of its flags."""
    for key in ("options", "abbreviations", "negated"):
        for spelling, flag in data[key].items():
            if flag not in data["flags"]:
                raise DataError(path, f"{key}.{spelling}", None, f"names {flag}, which is not in flags",
                                "regenerate the table with scripts/sglang-flags/flags_extract.py")


# pkgs/sgl-kernel/recipe.json: CMake defines and environment variables by name; kernel/inputs/recipe.py checks the
# architectures and the memory rule (jobs.py) across fields.
VARIABLE = r"[A-Za-z_][A-Za-z0-9_]*"
RECIPE = Obj({
    "cmake_defines": Map(Str(), keys=VARIABLE), "environment": Map(Str(), keys=VARIABLE),
    **{k: ListOf(Str(pattern=VARIABLE)) for k in ("arch_defines", "arch_environment", "planned_defines",
                                                  "planned_environment")},
    "supported_archs": ListOf(Str(nonempty=True)), "arch": Str(nonempty=True),
    "arch_specific_from_major": Int(minimum=0), "memory": AnyValue(),
})

# pkgs/sgl-kernel/reference-wheel.json: written by benchmarks/kernel-reproducibility/make_reference.py; the
# conditions it must name are kernel/reproducibility/conditions.py's (kernel/reproducibility/reference.py checks them).
_REFERENCE = Obj({
    "configuration": Obj({"command": Str(), "conditions": Map(Str()), "build_record": Obj({})}),
    "result": Obj({
        "wheel": Obj({"name": Str(nonempty=True), "sha256": SHA256, "size": Int(minimum=1)}),
        "members": Map(SHA256, nonempty=True),
        "compiled": Map(Obj({"sha256": SHA256, "size": Int(minimum=0)})),
    }),
})
REFERENCE_WHEEL_SCHEMA = 2
REFERENCE_WHEEL = Obj({
    "schema_version": Literal((REFERENCE_WHEEL_SCHEMA,)),
    "current": Opt(_REFERENCE),
    "withdrawn": ListOf(Obj({"wheel": Obj({"name": Str(nonempty=True), "sha256": SHA256}),
                             "cuda_archs": Str(nonempty=True), "measured": Str(), "why": Str(nonempty=True)})),
    "to_record": Str(nonempty=True),
}, optional={"current_reason": Str(nonempty=True)})
BUILD_RECORD_MEMBER = "sgl_kernel/_build_info.json"


def check_reference_wheel(data: dict[str, Any], path: Path) -> None:
    """A current reference's compiled libraries are among its members, with the build record; none: say why."""
    current = data["current"]
    if current is None:
        if "current_reason" not in data:
            raise DataError(path, None, "current_reason", "must say why no reference is current")
        return
    members = current["result"]["members"]
    if BUILD_RECORD_MEMBER not in members:
        raise DataError(path, None, "current.result.members", f"needs the member {BUILD_RECORD_MEMBER}")
    for name, compiled in current["result"]["compiled"].items():
        if members.get(name) != compiled["sha256"]:
            raise DataError(path, None, f"current.result.compiled.{name}", "is not the same as its entry in result.members")
# pkgs/sgl-kernel/sources.json (kernel/inputs/sources.py, lib/kernel-sources.nix); sources.py checks what a
# verified or unverified pin must say. A pin is fetched from GitHub (a commit or a release tag) or as a zip.
_SOURCE_PIN = {
    "hash": Opt(_SRI), "hash_source": Opt(Str()), "hash_checked": Literal(HASH_CHECKS), "verified": Bool(),
    "reason": Opt(Str()),
}
_SUBMODULE_PATH = r"(?!/)(?!.*(^|/)\.{0,2}(/|$)).+"
# A path a pin's filter keeps or drops (kernel/inputs/source_filter.py): relative, no '.' or '..', and only
# characters that the Nix fetch's postFetch can name without quoting.
_FILTER_PATH = Str(pattern=r"(?!.*(^|/)\.{1,2}(/|$))[A-Za-z0-9_+.-]+(/[A-Za-z0-9_+.-]+)*",
                   means="a relative path of letters, digits and ._+- (no '.' or '..' parts)")
_FILTER = Obj({"why": _TEXT}, {"keep": ListOf(_FILTER_PATH, nonempty=True),
                               "drop": ListOf(_FILTER_PATH, nonempty=True)})


def _source(optional: dict[str, Shape]) -> Shape:
    optional = {"filter": _FILTER, **optional}
    return Tagged("fetcher", "fetchFromGitHub", {
        "fetchFromGitHub": Obj({"owner": _TEXT, "repo": _TEXT, "rev": Str(
            pattern=r"[0-9a-f]{40}|v\d+(\.\d+)+", means="a full commit (40 hex digits) or a vX.Y tag"),
            **_SOURCE_PIN}, optional),
        "fetchzip": Obj({"url": _TEXT, **_SOURCE_PIN}, optional),
    })


KERNEL_SOURCES = Obj({
    "schema_version": Literal((1,)), "update_command": _TEXT, "sglang": _source({}),
    "fetchcontent": Map(_source({"submodules": Opt(Map(_source({}), keys=_SUBMODULE_PATH, means=(
        "a relative path inside the source, as .gitmodules writes it (csrc/cutlass)")))})),
})

# pkgs/sgl-kernel/kernel-tests.json: `kernel test`'s rules (kernel/test/selection.py); a rule skips its file with `skip`,
# or says in `why` what the file tests (the reason given when the host, the wheel or its GPU cannot run it).
_KERNEL_TEST_RULE_FIELDS = {
    "needs_gpus": Int(minimum=1), "needs_libraries": NAMES,
    "needs_archs": ListOf(Str(pattern=r"[0-9]+\.[0-9]+[af]?")),  # CUDA architectures, 12.0a
    "skip": Str(nonempty=True), "why": Str(nonempty=True),
}
KERNEL_TESTS = Obj({
    "schema_version": Literal((1,)),
    "files": Map(Obj({}, optional=_KERNEL_TEST_RULE_FIELDS)),
    "project_checks": Map(Obj({}, optional=_KERNEL_TEST_RULE_FIELDS)),
    # `kernel test --smoke`: these files (and project checks), each within `timeout` seconds.
    "smoke": Obj({"files": ListOf(_TEXT, nonempty=True), "timeout": Int(minimum=1), "why": _TEXT}),
})


def check_kernel_tests(data: dict[str, Any], path: Path) -> None:
    """Each rule has only the known fields, and either skips its file or says what the file tests."""
    for table in ("files", "project_checks"):
        for name, rule in data[table].items():
            unknown = sorted(set(rule) - set(_KERNEL_TEST_RULE_FIELDS))
            if unknown:
                raise DataError(path, f"{table}.{name}", unknown[0], "is not a field of a rule",
                                f"a rule has some of {', '.join(sorted(_KERNEL_TEST_RULE_FIELDS))}")
            if "skip" not in rule and "why" not in rule:
                raise DataError(path, f"{table}.{name}", "why", "is missing: a rule that does not skip its file "
                                "says what the file tests (it becomes the skip's reason)")


# flake.lock: written by `nix flake lock`; `pins show` and plan list its inputs.
FLAKE_LOCK = Obj({
    "version": Int(),
    "root": Str(nonempty=True),
    "nodes": Map(Obj({}, optional={
        "inputs": Map(Either((Str(nonempty=True), NAMES))),
        "locked": Obj({}, optional={"type": Str(), "narHash": Str(), "rev": Str(), "owner": Str(), "repo": Str()}),
    }), nonempty=True),
})


def check_flake_lock(data: dict[str, Any], path: Path) -> None:
    if data["root"] not in data["nodes"]:
        raise DataError(path, None, "root", f"{data['root']!r} is not one of its nodes", "lock again with `nix flake lock`")
    for name, node in data["nodes"][data["root"]].get("inputs", {}).items():
        ref = node if isinstance(node, str) else node[-1]
        if ref not in data["nodes"]:
            raise DataError(path, f"nodes.{data['root']}.inputs", name, f"{ref!r} is not one of its nodes",
                            "lock again with `nix flake lock`")


# nix/flake-inputs.json: where each narHash of flake.lock came from.
FLAKE_INPUTS = Obj({
    "schema_version": Literal((1,)),
    "update_command": Str(nonempty=True),
    "inputs": Map(Obj({"narHash": Str(nonempty=True), "verified": Bool(), "hash_checked": Literal(HASH_CHECKS)},
                      optional={"hash_source": Opt(Str()), "reason": Opt(Str()), "rev": Str(), "url": Str()})),
})

# nix/nixpkgs-config.json, nix/fixups/*.json: read by Nix alone, whose code says what it needs of them.
NIX_ONLY: Shape = AnyValue()

# src/blackwell_stack/verify/baselines/<name>.json; verify/baseline.py checks that each expectation names one
# of concurrency and min_concurrency.
BASELINE = Obj({
    "target": Str(), "model": _TEXT, "source": Str(),
    "expectations": ListOf(Obj({"name": _TEXT, "metric": _TEXT, "value": Num(above=0),
                                "relation": Literal(("at_least", "about"))},
                               optional={"concurrency": Int(minimum=1), "min_concurrency": Int(minimum=1)}), key="name"),
}, optional={"tolerance": Num(minimum=0, below=1)})

TEXT: Shape = AnyValue()  # patches (parsed by kernel/inputs/patch_series.py) and the kernel's check scripts

_STARTUP_IMPORT = Obj({
    "module": Str(pattern=r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"),
    "why": Str(nonempty=True),
    "source": Obj({"file": Str(nonempty=True), "line": Int(minimum=1), "text": Str(nonempty=True)}),
}, optional={
    "architectures": ListOf(Str(nonempty=True)),
    "when": Obj({}, optional={"min_compute_capability": Str(pattern=r"\d+\.\d+"),
                              "off_when_env": Map(ListOf(Str()))}),
})
STARTUP_IMPORTS = Obj({
    "schema_version": Literal((1,)),
    "sglang": Map(ListOf(_STARTUP_IMPORT)),
})

FAILURE_TEXT = Obj({
    "schema_version": Literal((1,)),
    "failures": ListOf(Obj({"name": Str(nonempty=True), "pattern": Str(nonempty=True), "what": Str(nonempty=True),
                            "source": Str(nonempty=True)})),
})

# src/blackwell_stack/verify/gsm8k.json: the accuracy gate's data files by hash and its pass mark per profile
# (verify/gsm8k_data.py); `kind` says where a threshold comes from: a published figure for the model on the card,
# the same server's bf16-KV run, or a floor meant to catch garbage.
THRESHOLD_KINDS = ("published", "bf16-kv-run", "floor")
_GSM8K_FILE = Obj({"file": Str(pattern=r"[A-Za-z0-9_.-]+\.jsonl"), "url": Str(pattern=r"https://.+"), "sha256": SHA256,
                   "size": Int(minimum=1), "rows": Int(minimum=1)})
GSM8K = Obj({
    "schema_version": Literal((1,)),
    "dataset": Obj({"repository": _TEXT, "commit": Str(pattern=r"[0-9a-f]{40}"), "license": _TEXT, "source": _TEXT,
                    "files": Obj({"train": _GSM8K_FILE, "test": _GSM8K_FILE})}),
    "thresholds": Map(Obj({"min_accuracy": Num(above=0, below=1), "kind": Literal(THRESHOLD_KINDS),
                           "source": _TEXT})),
})
