"""SGLang's own argparse parser, built from an sglang wheel in a child process, reported as JSON.

    python -c "$(this file)" WHEEL stand-ins|installed

Run by flags_extract.py in a child process: it uses the standard
library only, so it runs in any interpreter (the stack's environment, or the
CLI's own). `ServerArgs.add_cli_args` is SGLang's code; what it registers is
read from the parser's actions, so no layout of SGLang's source is assumed.

- `installed`: the interpreter has this sglang installed with its
  dependencies; everything imports for real.
- `stand-ins`: the wheel's own source for the modules that build the parser
  (`REAL`), and for every other `sglang.*` module a stand-in: those import
  torch and need a GPU. A value a stand-in produced (a choices list imported
  from a model module, say) is reported as unresolved, with the name it was
  reached by, never as a value.
"""

import argparse
import importlib.abc
import importlib.machinery
import json
import sys
import types
import zipfile

# Never a module from the current directory (python -c puts it first on sys.path).
sys.path[:] = [p for p in sys.path if p not in ("", ".")]

# The sglang modules that build the parser: server_args.py, and from about 0.5.20 the field classes it registers
# (sglang/srt/arg_groups/).
REAL = ("sglang.srt.server_args", "sglang.srt.arg_groups")
MARK = "<stand-in "
MEMBER_LIMIT = 64 << 20  # formats/wheelzip.py's MEMBER_LIMIT: a source file far larger is not SGLang's


class StandIn:
    """Whatever a stood-in module is asked for: more stand-ins, each named by how it was reached."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandIn(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        return StandIn(f"{self._name}()")

    def __iter__(self):  # list(x) of a stand-in is a list of one stand-in, so it is still seen as one
        return iter([StandIn(f"{self._name}[*]")])

    def __getitem__(self, key):
        return StandIn(f"{self._name}[{key!r}]")

    def __mro_entries__(self, bases):  # `class X(StandIn)`: a plain base
        return (object,)

    def __str__(self):
        return f"{MARK}{self._name}>"

    def __repr__(self):
        return str(self)

    def __format__(self, spec):
        return str(self)

    def __lt__(self, other):  # sorted() over a list that holds one
        return False


def _operator(symbol):
    return lambda self, *other: StandIn(f"({self._name} {symbol} ...)")


# `CHOICES + ["x"]`, `["x"] + CHOICES`, `A | B`: still a stand-in.
for _name, _symbol in (("add", "+"), ("mul", "*"), ("or", "|"), ("and", "&"), ("sub", "-")):
    setattr(StandIn, f"__{_name}__", _operator(_symbol))
    setattr(StandIn, f"__r{_name}__", _operator(_symbol))


class StandInModule(types.ModuleType):
    __path__: list[str] = []  # noqa: RUF012 (a package: its submodules are stand-ins too)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandIn(f"{self.__name__}.{attr}")


class WheelFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """sglang.*: the wheel's own source for REAL, stand-ins for the rest."""

    def __init__(self, zf):
        self.zf, self.names = zf, set(zf.namelist())

    def _source(self, name):
        if not any(name == r or name.startswith(r + ".") for r in REAL):
            return None
        base = name.replace(".", "/")
        return next((p for p in (base + ".py", base + "/__init__.py") if p in self.names), None)

    def find_spec(self, name, path, target=None):
        if name != "sglang" and not name.startswith("sglang."):
            return None
        src = self._source(name)
        return importlib.machinery.ModuleSpec(name, self, origin=src,
                                              is_package=src is None or src.endswith("__init__.py"))

    def create_module(self, spec):
        if spec.origin is None:
            return StandInModule(spec.name)
        module = types.ModuleType(spec.name)
        module.__file__ = spec.origin
        if spec.origin.endswith("__init__.py"):
            module.__path__ = []
        return module

    def exec_module(self, module):
        if getattr(module, "__file__", None):
            with self.zf.open(module.__file__) as member:  # read to one byte past the limit, never further
                source = member.read(MEMBER_LIMIT + 1)
            if len(source) > MEMBER_LIMIT:
                raise SystemExit(f"member {module.__file__} inflates to more than {MEMBER_LIMIT >> 20} MiB")
            exec(compile(source.decode(), module.__file__, "exec"), module.__dict__)


def plain(value):
    """(JSON value, None), or (None, why not): a stand-in or anything JSON cannot hold is never guessed."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    elif isinstance(value, tuple):
        value = list(value)
    text = json.dumps(value, default=lambda v: f"{MARK}{type(v).__name__}>" if not isinstance(v, StandIn) else str(v))
    if MARK in text:
        return None, text[text.index(MARK) + len(MARK):].split(">")[0]
    return json.loads(text), None


def type_name(convert):
    """How a flag's value is converted: `int`, `json.loads`, a stand-in's name, or None for a plain string."""
    if convert is None or isinstance(convert, StandIn):
        return None if convert is None else convert._name.rsplit(".", 1)[-1]
    module = getattr(convert, "__module__", None)
    name = getattr(convert, "__qualname__", type(convert).__name__)
    return name if module in (None, "builtins") or module.startswith("sglang") else f"{module}.{name}"


def action_entry(action, kinds):
    found = action.choices
    if found is not None and not isinstance(found, (list, tuple, set, frozenset, StandIn)):
        found = list(found)  # dict keys, a range: what argparse checks `in`
    choices, choices_why = plain(found) if found is not None else (None, None)
    default, default_why = plain(action.default)
    kind = kinds.get(type(action), type(action).__name__)
    return {
        "options": list(action.option_strings), "dest": action.dest, "nargs": action.nargs,
        "action": kind, "type": type_name(action.type),
        "choices": choices, "choices_unresolved": choices_why, "default": default, "default_unresolved": default_why,
        "required": bool(action.required),
    }


def build_parser(wheel, mode):
    """SGLang's parser, as `launch_server` builds it."""
    if mode == "stand-ins":
        sys.meta_path.insert(0, WheelFinder(zipfile.ZipFile(wheel)))
    import sglang.srt.server_args as server_args  # after the finder

    parser = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def main(wheel, mode):
    parser = build_parser(wheel, mode)
    kinds = {cls: name for name, cls in parser._registries["action"].items() if isinstance(name, str)}
    kinds[argparse.BooleanOptionalAction] = "BooleanOptionalAction"
    json.dump({"actions": [action_entry(a, kinds) for a in parser._actions if a.option_strings]}, sys.stdout)


if __name__ == "__main__" and sys.argv[2:3] in (["stand-ins"], ["installed"]):
    main(*sys.argv[1:3])
