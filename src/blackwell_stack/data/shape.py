"""The shapes of the data files: a small declarative schema, checked when a file is loaded.

A shape says what a value must be (an object with these fields, a list of
strings, a positive integer, ...). `check(shape, data, path)` raises a
DataError (exit 3) naming the file, the entry and the field of the first
value that does not fit, so that a data file of the wrong shape is refused
with what to fix, never met later as a traceback. Extra object fields are
allowed unless a shape says otherwise: files carry descriptions and notes.

    Obj({"schema_version": Literal(1), "files": Map(Obj({"sha256": Str()}))}, optional={"note": Str()})
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from blackwell_stack.errors import DataError

Where = tuple[str | int, ...]


class Shape:
    """What a value must be: `fits` for a plain value, `problem` where parts of it are checked one by one."""

    def describe(self) -> str:
        raise NotImplementedError

    def fits(self, value: Any) -> bool:
        raise NotImplementedError

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        """(where, what is wrong) for the first part of `value` that does not fit, or None."""
        return None if self.fits(value) else (where, f"must be {self.describe()}, found {_show(value)}")


@dataclass(frozen=True)
class AnyValue(Shape):
    def describe(self) -> str:
        return "any value"

    def fits(self, value: Any) -> bool:
        return True


@dataclass(frozen=True)
class Str(Shape):
    nonempty: bool = False
    pattern: str | None = None  # a regular expression the whole string matches
    means: str | None = None  # what the pattern is, for the message ("a sha256 SRI hash, sha256-<base64>")

    def describe(self) -> str:
        return "a non-empty string" if self.nonempty else "a string"

    def fits(self, value: Any) -> bool:
        return isinstance(value, str) and bool(value or not self.nonempty)

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        if self.fits(value) and self.pattern and not re.fullmatch(self.pattern, value):
            return where, f"{_show(value)} is not {self.means or 'of the form ' + self.pattern}"
        return super().problem(value, where)


@dataclass(frozen=True)
class Int(Shape):
    minimum: int | None = None

    def describe(self) -> str:
        return "a whole number" + (f" of at least {self.minimum}" if self.minimum is not None else "")

    def fits(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and (self.minimum is None or value >= self.minimum)


@dataclass(frozen=True)
class Num(Shape):
    """A finite number (NaN compares as neither below nor above anything; true is not 1), within bounds."""

    above: float | None = None  # exclusive
    below: float | None = None  # exclusive
    minimum: float | None = None  # inclusive

    def describe(self) -> str:
        bounds = [f"above {self.above:g}" if self.above is not None else "",
                  f"of at least {self.minimum:g}" if self.minimum is not None else "",
                  f"below {self.below:g}" if self.below is not None else ""]
        return " ".join(["a finite number", *filter(None, bounds)])

    def fits(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
            (self.above is None or value > self.above) and (self.below is None or value < self.below) and \
            (self.minimum is None or value >= self.minimum)


@dataclass(frozen=True)
class Bool(Shape):
    def describe(self) -> str:
        return "true or false"

    def fits(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class Literal(Shape):
    values: tuple[Any, ...]

    def describe(self) -> str:
        return " or ".join(_show(v) for v in self.values)

    def fits(self, value: Any) -> bool:
        return any(value == v and type(value) is type(v) for v in self.values)


@dataclass(frozen=True)
class Opt(Shape):
    """The shape, or null."""

    shape: Shape

    def describe(self) -> str:
        return f"{self.shape.describe()} or null"

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        return None if value is None else self.shape.problem(value, where)


@dataclass(frozen=True)
class Either(Shape):
    shapes: tuple[Shape, ...]

    def describe(self) -> str:
        return " or ".join(s.describe() for s in self.shapes)

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        found = [s.problem(value, where) for s in self.shapes]
        if any(p is None for p in found):
            return None
        # A value of the right kind reports its own inner problem; otherwise say what it may be.
        deeper = [p for p in found if p is not None and len(p[0]) > len(where)]
        return deeper[0] if deeper else (where, f"must be {self.describe()}, found {_show(value)}")


@dataclass(frozen=True)
class Tagged(Shape):
    """An object whose field `tag` (or `default` when it has none) says which of `variants` it must fit."""

    tag: str
    default: str
    variants: dict[str, Shape]

    def describe(self) -> str:
        return f"an object with {self.tag} one of {', '.join(self.variants)}"

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        if not isinstance(value, dict):
            return where, f"must be an object, found {_show(value)}"
        kind = value.get(self.tag, self.default)
        if not isinstance(kind, str) or kind not in self.variants:
            return (*where, self.tag), f"must be {' or '.join(map(repr, self.variants))}, found {_show(kind)}"
        return self.variants[kind].problem(value, where)


@dataclass(frozen=True)
class ListOf(Shape):
    items: Shape
    nonempty: bool = False
    key: str | None = None  # a field that names an item in messages (a rule's "id"), where it is a string

    def describe(self) -> str:
        return ("a non-empty list" if self.nonempty else "a list") + f" of {self.items.describe()}"

    def fits(self, value: Any) -> bool:
        return isinstance(value, list) and bool(value or not self.nonempty)

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        if not self.fits(value):
            return super().problem(value, where)
        for i, item in enumerate(value):
            name = item.get(self.key) if self.key and isinstance(item, dict) else None
            found = self.items.problem(item, (*where, name if isinstance(name, str) and name else i))
            if found:
                return found
        return None


@dataclass(frozen=True)
class Map(Shape):
    """An object whose keys are names (of packages, flags, ...) and whose values all have one shape."""

    values: Shape
    nonempty: bool = False
    keys: str | None = None  # a regular expression every key matches
    means: str | None = None  # what the keys are, for the message ("a flag, --name")

    def describe(self) -> str:
        return f"an object of {self.values.describe()}"

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        if not isinstance(value, dict) or (self.nonempty and not value):
            return where, f"must be {'a non-empty' if self.nonempty else 'an'} object, found {_show(value)}"
        for key, item in value.items():
            if self.keys and not re.fullmatch(self.keys, key):
                return (*where, key), f"{key!r} is not {self.means or 'a name of the form ' + self.keys}"
            found = self.values.problem(item, (*where, key))
            if found:
                return found
        return None


@dataclass(frozen=True)
class Obj(Shape):
    """An object with these fields (each required) and these optional ones; others are allowed."""

    fields: dict[str, Shape]
    optional: dict[str, Shape] = field(default_factory=dict)

    def describe(self) -> str:
        return "an object"

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict)

    def problem(self, value: Any, where: Where) -> tuple[Where, str] | None:
        if not self.fits(value):
            return super().problem(value, where)
        for name, shape in [*self.fields.items(), *self.optional.items()]:
            if name not in value and name in self.fields:
                return (*where, name), f"is missing (it must be {shape.describe()})"
            found = shape.problem(value[name], (*where, name)) if name in value else None
            if found:
                return found
        return None


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check(shape: Shape, data: Any, path: object, hint: str | None = None) -> None:
    """DataError naming the file, entry and field of the first value of `data` that does not fit `shape`:
    where ("files", "torch", "sha256") is entry "files.torch", field "sha256"; list indices stay with their list."""
    found = shape.problem(data, ())
    if found:
        where, problem = found
        parts: list[str] = []
        for step in where:
            if isinstance(step, int) and parts:
                parts[-1] += f"[{step}]"
            else:
                parts.append(str(step))
        raise DataError(path, ".".join(parts[:-1]) or None, parts[-1] if parts else None, problem, hint)
