"""SGLang's real flag table, read statically from `sglang/srt/server_args.py`.

Importing server_args needs torch and a GPU, so the file is parsed with `ast`:
every `parser.add_argument("--x", ...)` call gives a flag's option strings,
dest, type, action, nargs, choices and default. Choices and defaults written
as module-level constants (`choices=ATTENTION_BACKEND_CHOICES`,
`default=ServerArgs.kv_cache_dtype`) are resolved from the same file; what
cannot be resolved statically is recorded as unresolved, never guessed.

From about 0.5.20 most flags are annotated dataclass fields instead; that
layout is read by flags_fields.py, and both feed the same table.

One table per SGLang version is committed as `modules/sglang-flags/<version>.json`
(data, with the wheel's name and sha256); a stack selects its table by the
version of SGLang it holds (`load_table(version)`, and `flagTableFor` in
lib/sglang-service.nix). Regenerate one with
`blackwell-stack serve flags extract --wheel <the sglang wheel>`.
"""

from __future__ import annotations

import ast
import functools
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackwell_stack.errors import DataError, StackError
from blackwell_stack.hashes import hex_to_sri, sha256_file
from blackwell_stack.paths import data_path
from blackwell_stack.serve import versions

SERVER_ARGS = "sglang/srt/server_args.py"
FLAGS_DIR = ("modules", "sglang-flags")
GENERATOR = "blackwell-stack serve flags extract --wheel {wheel} --output modules/sglang-flags/{version}.json"
# The wheel a table is extracted from: the pure wheel where there is one (0.5.9),
# else the CPython 3.12 x86_64 one that the stacks install (0.5.23 ships only platform wheels).
WHEEL_HINT = "sglang-{version}-py3-none-any.whl or sglang-{version}-cp312-cp312-manylinux_2_34_x86_64.whl"
SCHEMA_VERSION = 2

# argparse actions that consume no value on the command line.
_NO_VALUE_ACTIONS = {
    "store_true", "store_false", "store_const", "count", "help", "version",
    "BooleanOptionalAction", "argparse.BooleanOptionalAction",
}
_BOOLEAN_OPTIONAL = {"BooleanOptionalAction", "argparse.BooleanOptionalAction"}


class _Unresolved(Exception):
    pass


@dataclass
class _Module:
    """Module-level constants and dataclass field defaults of server_args.py."""

    constants: dict[str, Any]
    field_defaults: dict[str, dict[str, Any]]  # class name -> field -> literal default
    action_nargs: dict[str, Any]  # custom argparse.Action class -> its __init__ nargs default
    action_defaults: dict[str, Any] = field(default_factory=dict)  # ... and its __init__ default=
    # f("x") for functions whose value is known statically: name -> (found, value) of the argument
    call_resolvers: dict[str, Callable[[str], tuple[bool, Any]]] = field(default_factory=dict)


def _literal(node: ast.AST, module: _Module) -> Any:
    """The value of a constant expression, resolving names and Class.field defaults."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        out: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                out.extend(_literal(elt.value, module))
            else:
                out.append(_literal(elt, module))
        return out
    if isinstance(node, ast.Set):
        # A set has no order: sort it so the table is stable.
        return sorted(_literal(ast.List(elts=node.elts), module), key=repr)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand, module)
        if isinstance(value, (int, float)):
            return -value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _literal(node.left, module), _literal(node.right, module)
        if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
            return left + right
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right)):
            return left + right if isinstance(node.op, ast.Add) else left * right
    if isinstance(node, ast.Name) and node.id in module.constants:
        return module.constants[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        fields = module.field_defaults.get(node.value.id)
        if fields is not None and node.attr in fields:
            return fields[node.attr]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in module.call_resolvers
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        found, value = module.call_resolvers[node.func.id](node.args[0].value)
        if found:
            return value
    raise _Unresolved(ast.unparse(node))


def _scan_module(tree: ast.Module) -> _Module:
    module = _Module(constants={}, field_defaults={}, action_nargs={})
    _scan_into(tree, module)
    return module


def _scan_into(tree: ast.Module, module: _Module) -> None:
    """Record tree's module-level constants, class field defaults and custom actions' nargs in module."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                module.constants[stmt.targets[0].id] = _literal(stmt.value, module)
            except _Unresolved:
                pass
        elif isinstance(stmt, ast.ClassDef):
            fields: dict[str, Any] = {}
            for item in stmt.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    try:
                        fields[item.target.id] = _literal(item.value, module)
                    except _Unresolved:
                        pass  # field(default_factory=...) and other computed defaults
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    # class DeprecatedAction(argparse.Action): def __init__(..., nargs=0, ...)
                    args = item.args
                    names = [a.arg for a in args.args]
                    defaults = dict(zip(names[len(names) - len(args.defaults) :], args.defaults))
                    for key, table in (("nargs", module.action_nargs), ("default", module.action_defaults)):
                        if key in defaults:
                            try:
                                table[stmt.name] = _literal(defaults[key], module)
                            except _Unresolved:
                                pass
            module.field_defaults[stmt.name] = fields


def _is_add_argument(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and node.args[0].value.startswith("-")
    )


def _takes_value(action: str, nargs: Any) -> str:
    """How many command-line values follow the flag: none, one, optional or many."""
    if action in _NO_VALUE_ACTIONS or nargs == 0:
        return "none"
    if nargs == "?":
        return "optional"
    if nargs in ("*", "+") or (isinstance(nargs, int) and nargs > 1):
        return "many"
    return "one"


def _negations(action: str, options: list[str]) -> list[str]:
    """The --no-X spellings argparse.BooleanOptionalAction adds for each --X (they store False)."""
    if action not in _BOOLEAN_OPTIONAL:
        return []
    return ["--no-" + o[2:] for o in options if o.startswith("--")]


def _flag_entry(call: ast.Call, module: _Module, filename: str = SERVER_ARGS) -> tuple[list[str], dict[str, Any]]:
    options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    long_options = [o for o in options if o.startswith("--")]
    primary = long_options[0] if long_options else options[0]
    dest = primary.lstrip("-").replace("-", "_")
    if "dest" in kw:
        dest = _literal(kw["dest"], module)

    action = "store"
    if "action" in kw:
        node = kw["action"]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            action = node.value
        else:
            action = ast.unparse(node)  # a custom Action class, e.g. DeprecatedAction

    nargs = None
    if "nargs" in kw:
        try:
            nargs = _literal(kw["nargs"], module)
        except _Unresolved as exc:
            nargs = f"unresolved: {exc}"
    elif action in module.action_nargs:
        nargs = module.action_nargs[action]

    entry: dict[str, Any] = {
        "dest": dest,
        "aliases": [o for o in options if o != primary],
        "action": action,
        "type": ast.unparse(kw["type"]) if "type" in kw else None,
        "nargs": nargs,
        "takes_value": _takes_value(action, nargs),
        "choices": None,
        "choices_unresolved": None,
        "default": None,
        "default_unresolved": None,
        "required": False,
        "negations": _negations(action, [primary] + [o for o in options if o != primary]),
        "file": filename,
        "line": call.lineno,
    }
    if "choices" in kw:
        try:
            entry["choices"] = list(_literal(kw["choices"], module))
        except _Unresolved as exc:
            entry["choices_unresolved"] = str(exc)
    if "default" in kw:
        try:
            entry["default"] = _literal(kw["default"], module)
        except _Unresolved as exc:
            entry["default_unresolved"] = str(exc)
    elif action == "store_true":
        entry["default"] = False
    elif action == "store_false":
        entry["default"] = True
    elif action in module.action_defaults:
        entry["default"] = module.action_defaults[action]
    if "required" in kw:
        try:
            entry["required"] = bool(_literal(kw["required"], module))
        except _Unresolved:
            pass
    return [primary] + entry["aliases"], entry


def _parse(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise StackError(
            f"{filename} is not valid Python for this interpreter: {exc}",
            "extract with a Python at least as new as the one the wheel targets",
        ) from exc


def _table(entries: list[tuple[list[str], dict[str, Any]]], filename: str) -> dict[str, Any]:
    """{"flags", "options"} from (option strings, entry) in registration order; the first of a name wins."""
    flags: dict[str, dict[str, Any]] = {}
    options: dict[str, str] = {}
    for names, entry in entries:
        primary = names[0]
        if primary in flags:
            # Defined twice (e.g. by two parsers): keep the first, as argparse would refuse a second.
            continue
        flags[primary] = entry
        for name in names + entry["negations"]:
            options.setdefault(name, primary)
    if not flags:
        raise StackError(
            f"{filename}: no parser.add_argument(...) calls found",
            "is this sglang/srt/server_args.py? The layout may have changed; check the wheel",
        )
    return {"flags": flags, "options": dict(sorted(options.items()))}


def _add_argument_entries(tree: ast.Module, module: _Module, filename: str) -> list[tuple[list[str], dict[str, Any]]]:
    """The parser.add_argument(...) calls of server_args.py, in source order."""
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_add_argument(n)), key=lambda n: n.lineno)
    return [_flag_entry(n, module, filename) for n in calls]


def extract_source(source: str, filename: str = SERVER_ARGS) -> dict[str, Any]:
    """The flag table of a server_args.py source text whose flags are all add_argument calls."""
    tree = _parse(source, filename)
    return _table(_add_argument_entries(tree, _scan_module(tree), SERVER_ARGS), filename)


def extract_files(read: Callable[[str], str | None], label: str) -> dict[str, Any]:
    """The flag table of an SGLang source tree; read(path) gives a file's text or None.

    Both layouts: add_argument calls in server_args.py (0.5.9), and annotated
    dataclass fields registered by add_cli_args_from_dataclass before the few
    remaining add_argument calls (flags_fields.py).
    """
    from blackwell_stack.serve import flags_fields

    source = read(SERVER_ARGS)
    if source is None:
        raise StackError(f"{label}: no {SERVER_ARGS}", "pass the sglang wheel from PyPI")
    filename = f"{label}:{SERVER_ARGS}"
    tree = _parse(source, filename)
    if not flags_fields.uses_fields_layout(tree):
        return _table(_add_argument_entries(tree, _scan_module(tree), SERVER_ARGS), filename)
    # Names server_args.py imports (choices lists, custom actions) resolve in their own modules.
    modules = flags_fields._Modules(read)
    module = modules.scan(flags_fields.SERVER_ARGS_MODULE)
    field_entries = flags_fields.extract_fields(modules)
    # server_args.py's own flags take `default=_declared_default("field")`.
    defaults = flags_fields.field_defaults(modules)
    module.call_resolvers["_declared_default"] = lambda name: (name in defaults, defaults.get(name))
    return _table(field_entries + _add_argument_entries(tree, module, SERVER_ARGS), filename)


def extract_wheel(wheel: Path) -> dict[str, Any]:
    """The flag table of an sglang wheel, with the wheel's name and hashes recorded."""
    wheel = Path(wheel)
    if not wheel.is_file():
        raise StackError(f"{wheel}: no such file", "download it with `pip download sglang==<version> --no-deps`")
    version = _wheel_version(wheel.name)
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = set(zf.namelist())
            if SERVER_ARGS not in members:
                raise StackError(
                    f"{wheel}: not an sglang wheel with {SERVER_ARGS}",
                    "pass the sglang wheel from PyPI: " + WHEEL_HINT.format(version=version),
                )

            def read(path: str) -> str | None:
                return zf.read(path).decode() if path in members else None

            table = extract_files(read, wheel.name)
    except zipfile.BadZipFile as exc:
        raise StackError(
            f"{wheel}: not an sglang wheel with {SERVER_ARGS} ({exc})",
            "pass the sglang wheel from PyPI: " + WHEEL_HINT.format(version=version),
        ) from exc
    digest = sha256_file(wheel)
    return {
        "schema_version": SCHEMA_VERSION,
        "description": (
            "Flags accepted by sglang's launch_server, extracted statically (ast) from "
            f"{SERVER_ARGS} of the wheel below and the field classes it registers "
            "(each flag's file and line). Choices held in module-level lists can be "
            "extended at run time by plugins (add_*_choices); the table holds what the wheel ships. "
            "Generated data: do not edit by hand."
        ),
        "sglang_version": version,
        "wheel": {
            "filename": wheel.name,
            "sha256": digest,
            "hash": hex_to_sri(digest),
            "hash_source": "sha256 of the wheel file computed here; the extractor's test checks it against PyPI's registry sha256",
        },
        "source_file": SERVER_ARGS,
        "generator_command": GENERATOR.format(wheel=wheel.name, version=version),
        **table,
    }


def _wheel_version(filename: str) -> str:
    parts = filename.split("-")
    if len(parts) < 3 or not filename.endswith(".whl"):
        raise StackError(f"{filename}: not a wheel file name", "expected " + WHEEL_HINT.format(version="<version>"))
    return parts[1]


# --- reading the committed table ---------------------------------------------------------


@dataclass(frozen=True)
class FlagTable:
    path: Path
    data: dict[str, Any]

    @property
    def flags(self) -> dict[str, dict[str, Any]]:
        return self.data["flags"]

    @property
    def options(self) -> dict[str, str]:
        return self.data["options"]

    def canonical(self, option: str) -> str | None:
        """The table's primary spelling of an option string, or None if SGLang does not accept it."""
        return self.options.get(option)

    def entry(self, option: str) -> dict[str, Any]:
        return self.flags[self.options[option]]

    def suggest(self, option: str) -> str | None:
        return suggest(option, self.data)


def table_path(version: str) -> Path:
    """Where the flag table of sglang `version` is committed."""
    versions.parse(version)  # a version, not a path
    return data_path(*FLAGS_DIR, f"{version}.json")


def default_output(wheel: Path) -> Path:
    """Where `serve flags extract` writes the table of `wheel` without --output: beside the others, by its version."""
    return table_path(_wheel_version(Path(wheel).name))


def available_versions() -> list[str]:
    """The SGLang versions that have a committed flag table, oldest first."""
    found = [p.stem for p in data_path(*FLAGS_DIR).glob("*.json")]
    return sorted(found, key=functools.cmp_to_key(versions.compare))


def extract_command(version: str) -> str:
    """The commands that make the flag table of sglang `version` (the message Nix gives too)."""
    return (
        f"pip download sglang=={version} --no-deps --only-binary=:all: --python-version 3.12 "
        f"--platform manylinux_2_34_x86_64 -d . && "
        + GENERATOR.format(wheel=f"sglang-{version}-*.whl", version=version)
    )


def load_table(version: str | None = None, path: Path | None = None) -> FlagTable:
    """The flag table of sglang `version` (default: the default profile's), or of the file at `path`."""
    if path is None:
        if version is None:
            from blackwell_stack.serve.profile import load_profile

            version = load_profile().runtime().sglang
        path = table_path(version)
        if not path.is_file():
            have = ", ".join(available_versions()) or "none"
            raise DataError(
                path, None, None, f"no SGLang flag table for sglang {version} (tables: {have})",
                "extract it from the sglang wheel: " + extract_command(version),
            )
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise DataError(path, None, None, "no such flag table", "pass a table written by `blackwell-stack serve flags extract`") from exc
    except json.JSONDecodeError as exc:
        raise DataError(path, None, None, f"not valid JSON: {exc}") from exc
    for key in ("flags", "options", "sglang_version"):
        if key not in data:
            raise DataError(path, None, key, "missing", "regenerate the table with `blackwell-stack serve flags extract`")
    if version is not None and data["sglang_version"] != version:
        raise DataError(
            path, None, "sglang_version", f"is {data['sglang_version']}, expected {version}",
            "regenerate it: " + extract_command(version),
        )
    return FlagTable(path, data)


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def suggest(option: str, table: dict[str, Any]) -> str | None:
    """The flag a misspelled option most likely meant, or None.

    First an option whose dest is what was typed (`--fp4-gemm-runner-backend`
    is the dest of `--fp4-gemm-backend`), then the nearest spelling by edit
    distance (at most a third of its length; ties go to the first in sorted
    order). lib/sglang-service.nix does exactly the same so that both sides
    suggest the same flag; difflib's ratio is not reproducible in Nix builtins.
    """
    wanted = option.lstrip("-").replace("-", "_")
    for name in sorted(table["flags"]):
        if table["flags"][name]["dest"] == wanted:
            return name
    bare = option.lstrip("-")
    limit = max(1, len(bare) // 3)
    best: tuple[int, str] | None = None
    for name in sorted(table["options"]):
        candidate = name.lstrip("-")
        if abs(len(candidate) - len(bare)) > limit:
            continue
        d = levenshtein(bare, candidate)
        if d <= limit and (best is None or d < best[0]):
            best = (d, name)
    return best[1] if best else None
