"""The project's maintainer scripts (benchmarks/, scripts/) imported by path, as tests import a module."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from support import REPO


def load(relpath: str) -> ModuleType:
    """The script at REPO/relpath as a module (registered under its file name: dataclasses look it up)."""
    path = REPO / relpath
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
