"""The rules of modules/rules.json, evaluated over a rendered configuration.

The condition language is small on purpose: the rules are data, read here alone (the NixOS module runs this check
when the system is built, modules/sglang/check.nix):

    operand   := JSON literal | {"var": [path...]} | {"mul": [operand, operand]}
    condition := {"all": [c...]} | {"any": [c...]} | {"not": c}
               | {"eq"|"ne"|"gt"|"lt"|"version_lt": [operand, operand]}
               | {"in": [operand, [literal...]]}

A missing path reads as null; gt/lt with a null or non-number operand are false, as is version_lt with a non-string
(versions.py orders the strings). Messages interpolate `{path.to.value}`.

Every rule states the versions it holds for, per runtime component as lists of PEP 440 specifier sets ({"versions":
{"sglang": {"holds": ["==0.5.9"], "not": [">=0.6.7"]}, ...}}; {} for a rule that no version changes). Against the
runtime's versions a rule applies ("yes": its condition decides, at its severity), does not apply ("no": it never
fires), or its truth is unknown ("unknown": when its condition holds it fires as a warning that says which version
was not checked, never as silence and never as an error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from blackwell_stack.data import versions
from blackwell_stack.errors import DataError
from blackwell_stack.serve.flags import canonical, suggest
from blackwell_stack.serve.render import INT_RE, Rendered

_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")


@dataclass
class Verdict:
    id: str
    severity: str  # as evaluated: a rule of unknown truth fires as a warning
    fired: bool
    messages: list[str] = field(default_factory=list)
    option: str | None = None
    source: str | None = None
    fix: dict[str, Any] | None = None
    applies: str = "yes"  # "yes", "no" (outside its versions) or "unknown"
    note: str | None = None  # why it does not apply, or which version was not checked


def lookup(ctx: dict[str, Any], path: list[str]) -> Any:
    value: Any = ctx
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def operand(node: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "var" in node:
            return lookup(ctx, node["var"])
        if "mul" in node:
            a, b = (operand(x, ctx) for x in node["mul"])
            return a * b if _is_number(a) and _is_number(b) else None
        raise DataError("modules/rules.json", None, "condition", f"unknown operand {node!r}")
    return node


def _equal(a: Any, b: Any) -> bool:
    # Nix: true != 1, unlike Python.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def holds(cond: dict[str, Any], ctx: dict[str, Any]) -> bool:
    (op, arg), = cond.items()
    if op == "all":
        return all(holds(c, ctx) for c in arg)
    if op == "any":
        return any(holds(c, ctx) for c in arg)
    if op == "not":
        return not holds(arg, ctx)
    if op == "in":
        value = operand(arg[0], ctx)
        return any(_equal(value, x) for x in arg[1])
    a, b = operand(arg[0], ctx), operand(arg[1], ctx)
    if op == "eq":
        return _equal(a, b)
    if op == "ne":
        return not _equal(a, b)
    if op in ("gt", "lt"):
        return _is_number(a) and _is_number(b) and (a > b if op == "gt" else a < b)
    if op == "version_lt":
        return isinstance(a, str) and isinstance(b, str) and versions.parse(a) < versions.parse(b)
    raise DataError("modules/rules.json", None, "condition", f"unknown condition {op!r}")


def show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(show(v) for v in value)
    return str(value)


def interpolate(message: str, ctx: dict[str, Any]) -> str:
    return _PLACEHOLDER.sub(lambda m: show(lookup(ctx, m.group(1).split("."))), message)


def _value_problem(name: str, value: Any, entry: dict[str, Any]) -> str | None:
    takes = entry["takes_value"]
    if takes == "none":
        if not isinstance(value, bool):
            return f"{name} is a switch and takes no value (got {show(value)})"
        return None
    values = value if isinstance(value, list) else [value]
    for v in values:
        if v is None:
            return f"{name} needs a value"
        if entry.get("choices") is not None and not any(show(v) == show(c) for c in entry["choices"]):
            return f"{name} {show(v)} is not one of the pinned SGLang's choices: {show(entry['choices'])}"
        integer = (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and INT_RE.match(v))
        if entry.get("type") == "int" and not integer:
            return f"{name} expects an integer, got {show(v)}"
    return None


def _unknown(name: str, where: str, table: dict[str, Any]) -> str:
    hint = suggest(name, table)
    version = table.get("sglang_version", "?")
    text = f"{where}: sglang {version} has no flag {name}"
    return text + (f"; did you mean {hint}?" if hint else f"; see modules/sglang-flags/{version}.json")


def flag_table_problems(rendered: Rendered, table: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    version = table.get("sglang_version", "?")
    for name in sorted(rendered.settings):
        primary, candidates = canonical(name, table)
        if primary is None and candidates:
            problems.append(f"settings: {name} is ambiguous in sglang {version}: {', '.join(candidates)}")
        elif primary is None:
            problems.append(_unknown(name, "settings", table))
        elif problem := _value_problem(name, rendered.settings[name], table["flags"][primary]):
            problems.append(f"settings: {problem}")
    parsed = rendered.parsed
    problems += [_unknown(name, "extraArgs", table) for name in parsed.unknown]
    problems += [f"extraArgs: {name} is ambiguous in sglang {version}: {', '.join(candidates)}"
                 for name, candidates in parsed.ambiguous]
    problems += [f"extraArgs: {token!s} is not a flag and follows no flag that takes a value" for token in parsed.stray]
    problems += [f"extraArgs: {problem}" for name in sorted(parsed.values)
                 if (problem := _value_problem(name, parsed.values[name], table["flags"][name]))]
    for name, entry in sorted(table["flags"].items()):
        # argparse's required=True: SGLang would stop at its parser (--model-path, removed by `--set model-path=null`).
        if entry.get("required") and name not in rendered.settings and name not in parsed.values:
            problems.append(f"{name} is required by sglang {version} and is not set: give it a value (the profile's "
                            f"own, unless a --set {name.lstrip('-')}=null or an override removed it)")
    return problems


def applicability(rule: dict[str, Any], runtime: dict[str, Any]) -> tuple[str, str | None]:
    """("yes" | "no" | "unknown", note) of a rule for the runtime's versions."""
    outside: list[str] = []
    unknown: list[str] = []
    for component in sorted(rule.get("versions", {})):
        spec = rule["versions"][component]
        held, not_held = spec.get("holds", []), spec.get("not", [])
        version = runtime.get(component)
        if not isinstance(version, str):
            unknown.append(f"the {component} version is not known (holds for {component} {versions.show(held)})")
        elif any(versions.holds(version, r) for r in held):
            continue
        elif any(versions.holds(version, r) for r in not_held):
            outside.append(f"{component} {version} (it holds for {component} {versions.show(held)})")
        else:
            unknown.append(
                f"not checked for {component} {version} (holds for {versions.show(held)}; "
                f"does not hold for {versions.show(not_held)})"
            )
    if outside:
        return "no", "does not apply to " + "; ".join(outside)
    return ("unknown", "; ".join(unknown)) if unknown else ("yes", None)


def evaluate(rendered: Rendered, rules: dict[str, Any], table: dict[str, Any]) -> list[Verdict]:
    verdicts = []
    for rule in rules["rules"]:
        applies, note = applicability(rule, rendered.context["runtime"])
        if applies == "no":
            messages: list[str] = []
        elif rule.get("check") == "flag_table":
            messages = flag_table_problems(rendered, table)
        elif "condition" in rule:
            messages = [interpolate(rule["message"], rendered.context)] if holds(rule["condition"], rendered.context) else []
        else:
            raise DataError("modules/rules.json", rule["id"], "check", f"unknown check {rule.get('check')!r}")
        severity = rule["severity"]
        if applies == "unknown" and messages:
            severity = "warning"
            messages = [f"(truth unknown: {note}) {m}" for m in messages]
        verdicts.append(Verdict(rule["id"], severity, bool(messages), messages, rule.get("option"), rule.get("source"),
                                rule.get("fix"), applies, note))
    return verdicts
