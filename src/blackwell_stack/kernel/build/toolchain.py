"""The toolchain sgl-kernel needs, checked before anything is compiled.

Each check runs the real tool (the build's Python, nvcc, cmake, ninja) and says what to do when it is wrong;
`toolchain_error` reports every failure at once so that one run tells the whole story.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from blackwell_stack import proc
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import ToolchainError
from blackwell_stack.kernel.build import compilers as compilers_mod
from blackwell_stack.kernel.inputs import patch_series

MIN_CMAKE = Version("3.31")  # upstream sets CMP0177 (CMake 3.31); patch 0001 only keeps older CMake from stopping
CUDA_MAJOR = 13  # of nvcc and of torch's CUDA: the stacks' torch is a cu130 build; CUDA 12 nvcc cannot target its ABI
MIN_SCIKIT_BUILD_CORE = Version("0.10")  # sgl-kernel/pyproject.toml build-system.requires


@dataclass
class Check:
    name: str
    ok: bool
    found: str
    fix: str | None = None
    value: str | None = None  # the bare version found, for the build record
    # torch: the directories that hold its package (site-packages, as imported and resolved), for the prefix maps;
    # a build tool: the program (the build is told to use the cmake)
    paths: tuple[str, ...] = ()

    def line(self) -> str:
        mark = "ok " if self.ok else "BAD"
        text = f"[{mark}] {self.name}: {self.found}"
        return text if self.ok or not self.fix else f"{text}\n        fix: {self.fix}"


@dataclass(frozen=True)
class TorchExpectation:
    """The torch a build must compile against, and why that one."""

    version: str
    source: str  # where the expectation comes from
    install: str  # the command that installs it
    override: str | None = None  # the option that chose it instead of the stack's, when one did

    def to_json(self) -> dict:
        return {"version": self.version, "source": self.source, "override": self.override}


def expected_torch(python: str, st: Stack, allow_torch: str | None = None) -> TorchExpectation:
    """The torch `kernel build` expects: the torch of the stack's lock (resolved by the command: the default
    stack unless --stack names one), unless --allow-torch names another version.

    The one place that decides it: every check, log line and build record follows.
    """
    version = st.versions()["torch"]
    locked = TorchExpectation(version, f"{st.relpath}/uv.lock", st.sync_command(Path(python).parent.parent))
    if allow_torch is None or allow_torch == version:
        return locked
    return TorchExpectation(
        allow_torch,
        f"--allow-torch {allow_torch} (instead of the {st.name} stack's {version})",
        f"{python} -m pip install 'torch=={allow_torch}'",
        override=f"--allow-torch {allow_torch}",
    )


_TORCH_PROBE = """
import importlib.metadata as m, json, os, torch
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
files = (torch.__file__, os.path.realpath(torch.__file__))
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                  "installed": {n: version(n) for n in ("torch", "pip", "scikit-build-core")},
                  "sites": [os.path.dirname(os.path.dirname(f)) for f in files]}))
"""


def check_torch(python: str, expected: TorchExpectation) -> list[Check]:
    version, install = expected.version, expected.install
    code, out = proc.probe([python, "-c", _TORCH_PROBE], stdout_only=True)
    if code == 127:
        return [Check("python", False, f"{python} not found", "pass --python with the venv's interpreter")]
    if code != 0:
        last = out.splitlines()[-1] if out else f"exit code {code}"
        return [Check("torch", False, f"not importable by {python} ({last})", install)]
    try:
        info = json.loads(out.splitlines()[-1])
        installed = info["installed"]
    except (ValueError, IndexError, KeyError, TypeError):
        return [Check("torch", False, f"{python} printed no torch version ({out[-200:] or 'nothing'})", install)]
    found, pip, sk = str(info["torch"]), installed["pip"], installed["scikit-build-core"] or ""
    # PyPI's CUDA builds say 2.12.1+cu130 in torch.__version__ and 2.12.1 in their metadata, which is what a lock
    # pins: either one matching the expected version is a match.
    matches = version in (found, installed["torch"])
    if matches:
        shown, fix = found + (f" (expected by {expected.source})" if expected.override else ""), None
    else:
        shown = f"{found} ({'expected' if expected.override else expected.source}: {version})"
        fix = (f"install it: {install}, or name the torch you have with --allow-torch {found}" if expected.override
               else f"install the stack's torch: {install}; or build against {found} on purpose with --allow-torch {found}")
    cuda = info["cuda"] or "none (CPU build)"
    cuda_ok = str(cuda).split(".")[0] == str(CUDA_MAJOR)
    try:
        sk_ok = bool(sk) and Version(sk) >= MIN_SCIKIT_BUILD_CORE
    except InvalidVersion:
        sk_ok = False
    return [
        Check("torch", matches, shown, fix, value=found, paths=tuple(dict.fromkeys(info["sites"]))),
        Check("torch CUDA", cuda_ok, f"torch.version.cuda = {cuda}",
              None if cuda_ok else f"torch must be a CUDA 13 build (+cu130): {install}"),
        Check("pip", bool(pip), pip or "not installed (a uv venv has none)",
              None if pip else f"the build runs `{python} -m pip wheel --no-build-isolation`: "
              f"uv pip install --python {python} pip (or {python} -m ensurepip)", value=pip),
        Check("scikit-build-core", sk_ok, sk or "not installed",
              None if sk_ok else f"{python} -m pip install 'scikit-build-core>={MIN_SCIKIT_BUILD_CORE}' "
              "(builds run without isolation)", value=sk or None),
    ]


def nvcc_path() -> str | None:  # the nvcc CMake will use
    return os.environ.get("CUDACXX") or shutil.which("nvcc")


def build_tool(name: str, python: str | None) -> str | None:
    """cmake/ninja as scikit-build-core will find them: beside the venv's Python first, then on PATH."""
    if python:
        beside = Path(python).parent / name
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    return shutil.which(name)


@dataclass(frozen=True)
class Tool:
    """A build tool checked by its `--version`."""

    version: str  # regex: group 1 is the version checked; a second group, if it matched, is the one recorded
    accepts: Callable[[str], bool]
    refused: str  # said after a version that is not accepted
    fix: str
    shown: str = ""  # said before the version


TOOLS = {
    # nvcc's own version (13.0.88, "V13.0.88" in its banner) is recorded, as the bytes depend on it; the release
    # (13.0) is what is checked.
    "nvcc": Tool(r"release (\d+\.\d+)(?:, V(\d+\.\d+\.\d+))?", lambda v: Version(v).major == CUDA_MAJOR,
                 f" (needs CUDA {CUDA_MAJOR}.x)", "install the CUDA 13.0 toolkit and put its bin/ first on PATH "
                 "(or set CUDACXX=/usr/local/cuda-13.0/bin/nvcc)", shown="CUDA "),
    "cmake": Tool(r"cmake version (\d+\.\d+(?:\.\d+)?)", lambda v: Version(v) >= MIN_CMAKE,
                  f" is too old (needs >= {MIN_CMAKE})",
                  f"install CMake >= {MIN_CMAKE} in the build environment: python -m pip install 'cmake>={MIN_CMAKE}'"),
    "ninja": Tool(r"(\S+)", lambda v: True, "", "python -m pip install ninja (or apt-get install ninja-build)"),
}


def check_tool(name: str, python: str | None = None) -> Check:
    """nvcc as CMake will find it, cmake or ninja as scikit-build-core will, by its `--version`."""
    tool = TOOLS[name]
    if name == "nvcc":
        path, missing = nvcc_path(), "not found (no CUDACXX, no nvcc on PATH)"
    else:
        path, missing = build_tool(name, python), "not on PATH"
    if not path:
        return Check(name, False, missing, tool.fix)
    code, out = proc.probe([path, "--version"])  # through proc, so that -v shows it
    found = re.search(tool.version, out) if code == 0 else None
    if found is None:
        return Check(name, False, f"{path} --version gave no version ({out[-200:] or code})", tool.fix)
    checked, recorded = found.group(1), found.groups()[-1] or found.group(1)
    ok = tool.accepts(checked)
    return Check(name, ok, f"{path}: {tool.shown}{checked}" + ("" if ok else tool.refused), None if ok else tool.fix,
                 value=recorded, paths=(path,))


def check_all(python: str, expected: TorchExpectation, found: list[compilers_mod.Compiler]) -> list[Check]:
    try:  # GNU patch applies the series here as in Nix (kernel/inputs/patch_series.py)
        path, version = patch_series.gnu_patch()
        patch = Check("patch", True, f"{path}: {version}")
    except ToolchainError as exc:
        patch = Check("patch", False, exc.message, exc.hint)
    # One check per compiler role; a C++ compiler that links its own C++ runtime is refused.
    return [*check_torch(python, expected), *(check_tool(name, python) for name in TOOLS), patch,
            *(Check(f"{c.role.name} compiler", c.ok, c.check_line(), None if c.ok else compilers_mod.DISTRIBUTION_FIX,
                    value=c.describe() if c.ok else None) for c in found)]


def toolchain_error(checks: list[Check]) -> ToolchainError | None:
    if all(c.ok for c in checks):
        return None
    return ToolchainError(
        "the toolchain cannot build sgl-kernel for the expected torch; nothing was compiled:\n"
        + "\n".join("  " + c.line() for c in checks),
        "fix each [BAD] line above, then run the same command again",
    )
