"""The toolchain sgl-kernel needs, checked before anything is compiled.

Each check runs the real tool (the build's Python, nvcc, cmake, ninja) and
says what to do when it is wrong; `require_toolchain` reports every failure at
once so that one run tells the whole story.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from blackwell_stack import proc
from blackwell_stack.errors import BuildError, ToolchainError
from blackwell_stack.model.stack import Stack

MIN_CMAKE = Version("3.31")  # upstream sets CMP0177 (CMake 3.31); patch 0001 only keeps older CMake from stopping
NVCC_MAJOR = 13  # CUDA 13: the stacks' torch is a cu130 build; CUDA 12 nvcc cannot target its ABI
TORCH_CUDA_MAJOR = "13"
MIN_SCIKIT_BUILD_CORE = Version("0.10")  # sgl-kernel/pyproject.toml build-system.requires


@dataclass
class Check:
    name: str
    ok: bool
    found: str
    fix: str | None = None
    value: str | None = None  # the bare version found, for the build record

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


def _run(argv: list[str], env: dict | None = None) -> tuple[int, str]:
    try:
        r = proc.run(argv, check=False, timeout=120, env=env)
    except ToolchainError:
        return 127, ""
    except BuildError:  # timed out
        return 124, ""
    return r.returncode, (r.stdout + r.stderr).strip()


_TORCH_PROBE = (
    "import json, torch; "
    "v = None\n"
    "try:\n"
    " import scikit_build_core as s; v = s.__version__\n"
    "except ImportError: pass\n"
    "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'skbuild': v}))"
)


def check_torch(python: str, expected: TorchExpectation) -> list[Check]:
    version = expected.version
    install = expected.install
    code, out = _run([python, "-c", _TORCH_PROBE])
    if code == 127:
        return [Check("python", False, f"{python} not found", "pass --python with the venv's interpreter")]
    if code != 0:
        last = out.splitlines()[-1] if out else f"exit code {code}"
        return [Check("torch", False, f"not importable by {python} ({last})", install)]
    info = json.loads(out.splitlines()[-1])
    checks = []
    found = str(info["torch"])
    if found == version:
        shown = found + (f" (expected by {expected.source})" if expected.override else "")
    else:
        shown = f"{found} ({'expected' if expected.override else expected.source}: {version})"
    checks.append(
        Check(
            "torch",
            found == version,
            shown,
            value=found,
            fix=None if found == version else (
                f"install the stack's torch: {install}; or build against {found} on purpose with --allow-torch {found}"
                if not expected.override else f"install it: {install}, or name the torch you have with --allow-torch {found}"
            ),
        )
    )
    cuda = info.get("cuda") or "none (CPU build)"
    cuda_ok = str(cuda).split(".")[0] == TORCH_CUDA_MAJOR
    checks.append(
        Check(
            "torch CUDA",
            cuda_ok,
            f"torch.version.cuda = {cuda}",
            None if cuda_ok else f"torch must be a CUDA 13 build (+cu130): {install}",
        )
    )
    sk = info.get("skbuild")
    sk_ok = False
    if sk:
        try:
            sk_ok = Version(sk) >= MIN_SCIKIT_BUILD_CORE
        except InvalidVersion:
            sk_ok = False
    checks.append(
        Check(
            "scikit-build-core",
            sk_ok,
            sk or "not installed",
            None if sk_ok else f"{python} -m pip install 'scikit-build-core>={MIN_SCIKIT_BUILD_CORE}' (builds run without isolation)",
            value=sk,
        )
    )
    return checks


def nvcc_path() -> str | None:
    """The nvcc CMake will use: $CUDACXX if set, else nvcc on PATH."""
    return os.environ.get("CUDACXX") or shutil.which("nvcc")


def parse_nvcc_version(text: str) -> Version | None:
    m = re.search(r"release (\d+)\.(\d+)", text)
    return Version(f"{m.group(1)}.{m.group(2)}") if m else None


def check_nvcc() -> Check:
    fix = "install the CUDA 13.0 toolkit and put its bin/ first on PATH (or set CUDACXX=/usr/local/cuda-13.0/bin/nvcc)"
    path = nvcc_path()
    if not path:
        return Check("nvcc", False, "not found (no CUDACXX, no nvcc on PATH)", fix)
    code, out = _run([path, "--version"])
    version = parse_nvcc_version(out) if code == 0 else None
    if version is None:
        return Check("nvcc", False, f"{path} --version gave no release ({out[-200:] or code})", fix)
    ok = version.major == NVCC_MAJOR
    return Check("nvcc", ok, f"{path}: CUDA {version}" + ("" if ok else f" (needs CUDA {NVCC_MAJOR}.x)"), None if ok else fix,
                 value=str(version))


def build_tool(name: str, python: str | None) -> str | None:
    """cmake/ninja as scikit-build-core will find them: beside the venv's Python first, then on PATH."""
    if python:
        beside = Path(python).parent / name
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    return shutil.which(name)


def parse_cmake_version(text: str) -> Version | None:
    m = re.search(r"cmake version (\d+\.\d+(?:\.\d+)?)", text)
    return Version(m.group(1)) if m else None


def check_cmake(python: str | None = None) -> Check:
    fix = f"install CMake >= {MIN_CMAKE} in the build environment: python -m pip install 'cmake>={MIN_CMAKE}'"
    path = build_tool("cmake", python)
    if not path:
        return Check("cmake", False, "not on PATH", fix)
    code, out = _run([path, "--version"])
    version = parse_cmake_version(out) if code == 0 else None
    if version is None:
        return Check("cmake", False, f"{path} --version gave no version", fix)
    ok = version >= MIN_CMAKE
    return Check("cmake", ok, f"{path}: {version}" + ("" if ok else f" is too old (needs >= {MIN_CMAKE})"), None if ok else fix,
                 value=str(version))


def check_ninja(python: str | None = None) -> Check:
    fix = "python -m pip install ninja (or apt-get install ninja-build)"
    path = build_tool("ninja", python)
    if not path:
        return Check("ninja", False, "not on PATH", fix)
    code, out = _run([path, "--version"])
    return Check("ninja", code == 0, f"{path}: {out or code}", None if code == 0 else fix, value=out or None)


def check_all(python: str, expected: TorchExpectation) -> list[Check]:
    return [*check_torch(python, expected), check_nvcc(), check_cmake(python), check_ninja(python)]


def toolchain_error(checks: list[Check]) -> ToolchainError | None:
    """The error a build stops with when a check failed (all checks listed), or None."""
    if all(c.ok for c in checks):
        return None
    return ToolchainError(
        "the toolchain cannot build sgl-kernel for the expected torch; nothing was compiled:\n"
        + "\n".join("  " + c.line() for c in checks),
        "fix each [BAD] line above, then run the same command again",
    )


def require_toolchain(python: str, expected: TorchExpectation) -> list[Check]:
    checks = check_all(python, expected)
    error = toolchain_error(checks)
    if error:
        raise error
    return checks
