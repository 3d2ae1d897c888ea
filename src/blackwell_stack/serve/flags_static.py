"""argparse calls read statically from SGLang's source: the shared part of the flag extractors.

Importing server_args needs torch and a GPU, so the files are parsed with
`ast`: a `parser.add_argument("--x", ...)` call gives a flag's option strings,
dest, type, action, nargs, choices and default. Choices and defaults written
as module-level constants (`choices=ATTENTION_BACKEND_CHOICES`,
`default=ServerArgs.kv_cache_dtype`) are resolved from the same file; what
cannot be resolved statically is recorded as unresolved, never guessed.
flags_extract.py reads add_argument calls with these, flags_fields.py the
annotated dataclass fields of newer SGLang.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from blackwell_stack.errors import StackError

SERVER_ARGS = "sglang/srt/server_args.py"

# argparse actions that consume no value on the command line.
_NO_VALUE_ACTIONS = {
    "store_true", "store_false", "store_const", "count", "help", "version",
    "BooleanOptionalAction", "argparse.BooleanOptionalAction",
}
_BOOLEAN_OPTIONAL = {"BooleanOptionalAction", "argparse.BooleanOptionalAction"}


class Unresolved(Exception):
    pass


@dataclass
class ModuleScan:
    """Module-level constants and dataclass field defaults of server_args.py."""

    constants: dict[str, Any]
    field_defaults: dict[str, dict[str, Any]]  # class name -> field -> literal default
    action_nargs: dict[str, Any]  # custom argparse.Action class -> its __init__ nargs default
    action_defaults: dict[str, Any] = field(default_factory=dict)  # ... and its __init__ default=
    # f("x") for functions whose value is known statically: name -> (found, value) of the argument
    call_resolvers: dict[str, Callable[[str], tuple[bool, Any]]] = field(default_factory=dict)


def literal(node: ast.AST, module: ModuleScan) -> Any:
    """The value of a constant expression, resolving names and Class.field defaults."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        out: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                out.extend(literal(elt.value, module))
            else:
                out.append(literal(elt, module))
        return out
    if isinstance(node, ast.Set):
        # A set has no order: sort it so the table is stable.
        return sorted(literal(ast.List(elts=node.elts), module), key=repr)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = literal(node.operand, module)
        if isinstance(value, (int, float)):
            return -value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = literal(node.left, module), literal(node.right, module)
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
    raise Unresolved(ast.unparse(node))


def scan_module(tree: ast.Module) -> ModuleScan:
    module = ModuleScan(constants={}, field_defaults={}, action_nargs={})
    scan_into(tree, module)
    return module


def scan_into(tree: ast.Module, module: ModuleScan) -> None:
    """Record tree's module-level constants, class field defaults and custom actions' nargs in module."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                module.constants[stmt.targets[0].id] = literal(stmt.value, module)
            except Unresolved:
                pass
        elif isinstance(stmt, ast.ClassDef):
            fields: dict[str, Any] = {}
            for item in stmt.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    try:
                        fields[item.target.id] = literal(item.value, module)
                    except Unresolved:
                        pass  # field(default_factory=...) and other computed defaults
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    # class DeprecatedAction(argparse.Action): def __init__(..., nargs=0, ...)
                    args = item.args
                    names = [a.arg for a in args.args]
                    defaults = dict(zip(names[len(names) - len(args.defaults) :], args.defaults))
                    for key, table in (("nargs", module.action_nargs), ("default", module.action_defaults)):
                        if key in defaults:
                            try:
                                table[stmt.name] = literal(defaults[key], module)
                            except Unresolved:
                                pass
            module.field_defaults[stmt.name] = fields


def is_add_argument(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and node.args[0].value.startswith("-")
    )


def takes_value(action: str, nargs: Any) -> str:
    """How many command-line values follow the flag: none, one, optional or many."""
    if action in _NO_VALUE_ACTIONS or nargs == 0:
        return "none"
    if nargs == "?":
        return "optional"
    if nargs in ("*", "+") or (isinstance(nargs, int) and nargs > 1):
        return "many"
    return "one"


def negations(action: str, options: list[str]) -> list[str]:
    """The --no-X spellings argparse.BooleanOptionalAction adds for each --X (they store False)."""
    if action not in _BOOLEAN_OPTIONAL:
        return []
    return ["--no-" + o[2:] for o in options if o.startswith("--")]


def flag_entry(call: ast.Call, module: ModuleScan, filename: str = SERVER_ARGS) -> tuple[list[str], dict[str, Any]]:
    options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    long_options = [o for o in options if o.startswith("--")]
    primary = long_options[0] if long_options else options[0]
    dest = primary.lstrip("-").replace("-", "_")
    if "dest" in kw:
        dest = literal(kw["dest"], module)

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
            nargs = literal(kw["nargs"], module)
        except Unresolved as exc:
            nargs = f"unresolved: {exc}"
    elif action in module.action_nargs:
        nargs = module.action_nargs[action]

    entry: dict[str, Any] = {
        "dest": dest,
        "aliases": [o for o in options if o != primary],
        "action": action,
        "type": ast.unparse(kw["type"]) if "type" in kw else None,
        "nargs": nargs,
        "takes_value": takes_value(action, nargs),
        "choices": None,
        "choices_unresolved": None,
        "default": None,
        "default_unresolved": None,
        "required": False,
        "negations": negations(action, [primary] + [o for o in options if o != primary]),
        "file": filename,
        "line": call.lineno,
    }
    if "choices" in kw:
        try:
            entry["choices"] = list(literal(kw["choices"], module))
        except Unresolved as exc:
            entry["choices_unresolved"] = str(exc)
    if "default" in kw:
        try:
            entry["default"] = literal(kw["default"], module)
        except Unresolved as exc:
            entry["default_unresolved"] = str(exc)
    elif action == "store_true":
        entry["default"] = False
    elif action == "store_false":
        entry["default"] = True
    elif action in module.action_defaults:
        entry["default"] = module.action_defaults[action]
    if "required" in kw:
        try:
            entry["required"] = bool(literal(kw["required"], module))
        except Unresolved:
            pass
    return [primary] + entry["aliases"], entry


def parse_source(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise StackError(
            f"{filename} is not valid Python for this interpreter: {exc}",
            "extract with a Python at least as new as the one the wheel targets",
        ) from exc
