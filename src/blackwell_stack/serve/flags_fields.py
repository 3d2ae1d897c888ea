"""SGLang's flags declared as annotated dataclass fields, read statically.

From about 0.5.20 SGLang declares most server flags as fields of namespace
classes (`sglang/srt/arg_groups/fields/*.py`):

    tp_size: A[int, Arg(help="...", aliases=["--tensor-parallel-size"])] = 1

and `ServerArgs.add_cli_args` turns them into `parser.add_argument` calls with
`add_cli_args_from_dataclass` (`sglang/srt/arg_groups/arg_utils.py`). This
module follows the same rules without importing anything: which classes
(`_INPUT_NAMESPACES` in server_args.py), in which order
(`POSITIONAL_FIELD_ORDER`, then declaration order), how an annotation becomes
an option (cli_name or `--field-name`, aliases, Literal choices, `list[...]`
as nargs "+", bool as store_true, `required` when there is no default), and
names imported from other modules of the wheel (choices lists in
`arg_groups/choices.py`, custom argparse actions). What cannot be resolved is
recorded as unresolved, as for the older layout (flags_extract.py).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from blackwell_stack.errors import StackError
from blackwell_stack.serve import flags_static as static

SERVER_ARGS_MODULE = "sglang.srt.server_args"
_ANNOTATED = {"A", "Annotated"}
_OPTIONAL = {"Optional"}
_UNION = {"Union"}
_LIST = {"List", "list"}
_LITERAL = {"Literal"}


def uses_fields_layout(tree: ast.Module) -> bool:
    """Whether server_args.py registers flags with add_cli_args_from_dataclass."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "add_cli_args_from_dataclass"
        for node in ast.walk(tree)
    )


class _Imported(dict):
    """A module's constants (or custom actions' nargs): names imported from other modules of the wheel resolve on first use."""

    def __init__(self, modules: _Modules, imports: dict[str, tuple[str, str]], kind: str):
        super().__init__()
        self._modules = modules
        self._imports = imports
        self._kind = kind  # "constants" or "action_nargs": the _Module field to look in
        self._tried: set[str] = set()

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if isinstance(key, str) and key in self._imports and key not in self._tried:
            self._tried.add(key)
            source, original = self._imports[key]
            table = getattr(self._modules.scan(source), self._kind)
            if original in table:
                self[key] = table[original]
                return True
        return False


class _Modules:
    """Modules of the wheel by dotted name: parsed once, with their constants and classes."""

    def __init__(self, read: Callable[[str], str | None]):
        self._read = read
        self._trees: dict[str, ast.Module | None] = {}
        self._scans: dict[str, static.ModuleScan] = {}

    def path(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if self._read(candidate) is not None:
                return candidate
        return None

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            path = self.path(module)
            source = self._read(path) if path else None
            self._trees[module] = ast.parse(source, filename=path or module) if source is not None else None
        return self._trees[module]

    def imports(self, module: str) -> dict[str, tuple[str, str]]:
        """Names bound by `from sglang... import x [as y]` at module level: y -> (module, x)."""
        tree = self.tree(module)
        out: dict[str, tuple[str, str]] = {}
        for stmt in tree.body if tree else []:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0 and stmt.module.startswith("sglang."):
                for alias in stmt.names:
                    out[alias.asname or alias.name] = (stmt.module, alias.name)
        return out

    def scan(self, module: str) -> static.ModuleScan:
        if module not in self._scans:
            imports = self.imports(module)
            scan = static.ModuleScan(
                constants=_Imported(self, imports, "constants"),
                field_defaults={},
                action_nargs=_Imported(self, imports, "action_nargs"),
                action_defaults=_Imported(self, imports, "action_defaults"),
            )
            self._scans[module] = scan  # registered first: import cycles end here
            tree = self.tree(module)
            if tree is not None:
                static.scan_into(tree, scan)
        return self._scans[module]

    def constant(self, module: str, name: str) -> tuple[bool, Any]:
        constants = self.scan(module).constants
        return (True, constants[name]) if name in constants else (False, None)

    def class_def(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> tuple[str, ast.ClassDef] | None:
        """The class `name` as seen from `module`: defined there or imported from another module of the wheel."""
        if (module, name) in seen:
            return None
        tree = self.tree(module)
        for stmt in tree.body if tree else []:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return module, stmt
        source = self.imports(module).get(name)
        if source is None:
            return None
        return self.class_def(source[0], source[1], seen | {(module, name)})


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr  # typing.Optional, argparse.BooleanOptionalAction
    return None


def _subscript(node: ast.AST) -> tuple[str | None, list[ast.expr]]:
    """(name of X, its arguments) for X[a, b]; (None, []) for anything else."""
    if not isinstance(node, ast.Subscript):
        return None, []
    args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return _name(node.value), list(args)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _unwrap_optional(node: ast.AST) -> ast.AST:
    """Optional[X], Union[X, None] and X | None give X; other unions stay as they are."""
    head, args = _subscript(node)
    if head in _OPTIONAL and len(args) == 1:
        return args[0]
    if head in _UNION:
        rest = [a for a in args if not _is_none(a)]
        if len(rest) == 1:
            return rest[0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        if _is_none(node.right):
            return node.left
        if _is_none(node.left):
            return node.right
    return node


def _scalar_type(node: ast.AST | None) -> str:
    """argparse's `type=` that _infer_type_func gives an annotation: str, int or float (anything else is str)."""
    name = _name(node) if node is not None else None
    return name if name in ("int", "float") else "str"


def _is_help(node: ast.AST) -> bool:
    """A bare string in the annotation is the help text (Arg(help=...))."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _is_help(node.left)


def _arg_meta(args: list[ast.expr]) -> dict[str, ast.expr] | None:
    """The keywords of the first Arg(...) (or {} for a bare help string); None when the field has no CLI metadata."""
    for node in args:
        if isinstance(node, ast.Call) and _name(node.func) == "Arg":
            return {k.arg: k.value for k in node.keywords if k.arg}
        if _is_help(node):
            return {}
    return None


def _field_entry(
    field: str, annotation: ast.AST, default: ast.AST | None, module: static.ModuleScan, file: str, line: int
) -> tuple[list[str], dict[str, Any]] | None:
    """One field as add_cli_args_from_dataclass registers it, or None when it has no command-line flag."""
    head, args = _subscript(annotation)
    if head not in _ANNOTATED or not args:
        return None
    meta = _arg_meta(args[1:])
    if meta is None:
        return None

    def literal(key: str) -> Any:
        return static.literal(meta[key], module) if key in meta else None

    try:
        if literal("no_cli"):
            return None
        cli_name = literal("cli_name") or "--" + field.replace("_", "-")
        aliases = list(literal("aliases") or [])
    except static.Unresolved as exc:
        raise StackError(f"{file}:{line}: cannot read the flag name of field {field} ({exc})",
                         "the field layout changed; extend blackwell_stack.serve.flags_fields") from None

    entry: dict[str, Any] = {
        "dest": field,
        "aliases": aliases,
        "action": "store",
        "type": None,
        "nargs": None,
        "takes_value": "one",
        "choices": None,
        "choices_unresolved": None,
        "default": None,
        "default_unresolved": None,
        "required": False,
        "negations": [],
        "file": file,
        "line": line,
    }
    if default is not None:
        try:
            entry["default"] = static.literal(default, module)
        except static.Unresolved as exc:
            entry["default_unresolved"] = str(exc)

    def set_choices(node: ast.AST) -> None:
        try:
            entry["choices"] = list(static.literal(node, module))
        except static.Unresolved as exc:
            entry["choices_unresolved"] = str(exc)

    def set_nargs(node: ast.AST) -> None:
        try:
            entry["nargs"] = static.literal(node, module)
        except static.Unresolved as exc:
            entry["nargs"] = f"unresolved: {exc}"

    type_parser = ast.unparse(meta["type_parser"]) if "type_parser" in meta else None
    inner = _unwrap_optional(args[0])
    inner_head, inner_args = _subscript(inner)

    if "action" in meta:
        node = meta["action"]
        entry["action"] = node.value if isinstance(node, ast.Constant) else ast.unparse(node)
        if entry["action"] in module.action_nargs:
            entry["nargs"] = module.action_nargs[entry["action"]]  # a custom Action's __init__ default
        extra = meta.get("action_kwargs")
        if isinstance(extra, ast.Dict):
            for key, value in zip(extra.keys, extra.values):
                if isinstance(key, ast.Constant) and key.value == "nargs":
                    set_nargs(value)
                elif isinstance(key, ast.Constant) and key.value == "type":
                    entry["type"] = ast.unparse(value)
                elif isinstance(key, ast.Constant) and key.value == "choices":
                    set_choices(value)
    elif inner_head in _LITERAL:
        if "choices" in meta:
            set_choices(meta["choices"])
        else:
            set_choices(ast.List(elts=inner_args))
        first = inner_args[0] if inner_args else None
        first_type = "int" if isinstance(first, ast.Constant) and type(first.value) is int else (
            "float" if isinstance(first, ast.Constant) and type(first.value) is float else "str")
        entry["type"] = type_parser or first_type
    elif inner_head in _LIST and type_parser is None:
        entry["type"] = _scalar_type(inner_args[0] if inner_args else None)
        if "nargs" in meta:
            set_nargs(meta["nargs"])
        else:
            entry["nargs"] = "+"
        if "choices" in meta:
            set_choices(meta["choices"])
    elif _name(inner) == "bool":
        entry["action"] = "store_true"
    else:
        entry["type"] = type_parser or _scalar_type(inner)
        if "choices" in meta:
            set_choices(meta["choices"])
        if "nargs" in meta:
            set_nargs(meta["nargs"])
        required = literal("required")
        if (required is True or (required is None and default is None)) and any(n.startswith("-") for n in [cli_name, *aliases]):
            entry["required"] = True
    if entry["choices"] == []:
        entry["choices"] = None  # `if arg_meta.choices:` passes no empty choices to argparse
    entry["takes_value"] = static.takes_value(entry["action"], entry["nargs"])
    entry["negations"] = static.negations(entry["action"], [cli_name, *aliases])
    return [cli_name, *aliases], entry


def _namespace_names(tree: ast.Module) -> list[str]:
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_INPUT_NAMESPACES" for t in stmt.targets)
            and isinstance(stmt.value, (ast.List, ast.Tuple))
        ):
            return [e.id for e in stmt.value.elts if isinstance(e, ast.Name)]
    raise StackError(
        f"{static.SERVER_ARGS}: no _INPUT_NAMESPACES list of field classes",
        "the field layout changed; extend blackwell_stack.serve.flags_fields",
    )


def _class_fields(cls: ast.ClassDef) -> list[tuple[str, ast.AnnAssign]]:
    out = []
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if _subscript(item.annotation)[0] == "ClassVar":
                continue
            out.append((item.target.id, item))
    return out


def _all_fields(modules: _Modules) -> tuple[list[str], dict[str, tuple[str, ast.AnnAssign]]]:
    """Every ServerArgs field in constructor order, with its module and declaration."""
    tree = modules.tree(SERVER_ARGS_MODULE)
    if tree is None:
        raise StackError(f"no {static.SERVER_ARGS} in the wheel", "pass an sglang wheel")
    fields: dict[str, tuple[str, ast.AnnAssign]] = {}
    for name in _namespace_names(tree):
        found = modules.class_def(SERVER_ARGS_MODULE, name)
        if found is None:
            raise StackError(f"{static.SERVER_ARGS}: cannot find the field class {name} in the wheel",
                             "the field layout changed; extend blackwell_stack.serve.flags_fields")
        module, cls = found
        for field, node in _class_fields(cls):
            fields.setdefault(field, (module, node))  # SGLang refuses a field declared twice
    found_order = modules.constant("sglang.srt.arg_groups.fields", "POSITIONAL_FIELD_ORDER")
    order = [n for n in (found_order[1] if found_order[0] else []) if n in fields]
    order += [n for n in fields if n not in set(order)]
    # ServerArgs' own annotations come after the namespaces' ({**namespaces, **own}).
    server_args = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "ServerArgs"), None)
    if server_args is not None:
        for field, node in _class_fields(server_args):
            if field not in fields:
                fields[field] = (SERVER_ARGS_MODULE, node)
                order.append(field)
    return order, fields


def field_defaults(modules: _Modules) -> dict[str, Any]:
    """The statically known default of every ServerArgs field, with or without a flag."""
    order, fields = _all_fields(modules)
    out: dict[str, Any] = {}
    for field in order:
        module, node = fields[field]
        if node.value is None:
            continue
        try:
            out[field] = static.literal(node.value, modules.scan(module))
        except static.Unresolved:
            pass
    return out


def extract_fields(modules: _Modules) -> list[tuple[list[str], dict[str, Any]]]:
    """(option strings, entry) for every field flag, in the order argparse registers them."""
    order, fields = _all_fields(modules)
    out = []
    for field in order:
        module, node = fields[field]
        path = modules.path(module) or module
        entry = _field_entry(field, node.annotation, node.value, modules.scan(module), path, node.lineno)
        if entry is not None:
            out.append(entry)
    return out
