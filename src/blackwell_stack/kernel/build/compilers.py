"""The compilers a build compiles and links with: found as CMake would find them, tried, then pinned.

CMake takes the C and C++ compilers from $CC and $CXX (else `cc` and `c++` on PATH) and nvcc's host compiler from
$CUDAHOSTCXX; the host compiler also links every library with CUDA sources. A compiler that has only a static
libstdc++ (libstdc++.a, no libstdc++.so) links a copy of the C++ runtime into every library it makes, and such a
wheel crashed SGLang at start-up (`import deep_gemm`: a segmentation fault in torch.ops.deep_gemm.init). Nothing in
the build asks for that: the compiler does it silently.

So each C++ compiler links a small shared library that throws, and the library is read the way `inspect` reads the
wheel's (formats/cxxruntime.py): it must need libstdc++.so.6 and define no runtime symbol. The compilers that passed
are then given to CMake by path (CMAKE_C_COMPILER, CMAKE_CXX_COMPILER, CMAKE_CUDA_HOST_COMPILER), so what was tried
is what builds, and the build record names each with its version and its libstdc++.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import proc
from blackwell_stack.errors import StackError
from blackwell_stack.formats import cxxruntime, elf

# The library a C++ compiler must be able to link without carrying a C++ runtime of its own.
_PROBE = """#include <stdexcept>
#include <string>
extern "C" int blackwell_stack_probe(int n) {
  std::string s(static_cast<unsigned>(n), 'x');
  if (n > 3) throw std::runtime_error(s);
  return static_cast<int>(s.size());
}
"""
DISTRIBUTION_FIX = ("point CXX, CC and CUDAHOSTCXX at a compiler whose libstdc++ is a shared library, for example "
                    "the distribution's: CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++")


@dataclass(frozen=True)
class Role:
    name: str  # as the build record and the messages say it
    variable: str  # the environment variable CMake reads it from
    on_path: str | None  # what CMake looks for on PATH without the variable; None: the C++ compiler's
    define: str  # the CMake setting that pins it
    links_cxx: bool  # links C++ libraries: must use the shared C++ runtime


ROLES = (
    Role("c", "CC", "cc", "CMAKE_C_COMPILER", False),
    Role("c++", "CXX", "c++", "CMAKE_CXX_COMPILER", True),
    # Without $CUDAHOSTCXX nvcc would take the g++ on PATH; the build pins the C++ compiler instead.
    Role("cuda host c++", "CUDAHOSTCXX", None, "CMAKE_CUDA_HOST_COMPILER", True),
)


@dataclass(frozen=True)
class Compiler:
    role: Role
    path: str | None  # absolute; None when not found
    chosen_by: str  # "CXX=g++" or "c++ on PATH"
    version: str | None = None  # "gcc 13.3.0"
    libstdcxx: str | None = None  # what `-print-file-name=libstdc++.so` prints, when it is a path
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.path is not None and self.problem is None

    def describe(self) -> str:
        """`gcc 13.3.0 (/usr/bin/g++; libstdc++.so /usr/lib/gcc/x86_64-linux-gnu/13/libstdc++.so)`, for the
        build record and the reference conditions."""
        shared = f"; libstdc++.so {self.libstdcxx or 'none (static libstdc++ only)'}" if self.role.links_cxx else ""
        return f"{self.version or 'unknown version'} ({self.path}{shared})"

    def check_line(self) -> str:  # how it was chosen, and what it is
        if self.path is None:
            return self.problem or f"{self.chosen_by}: not found"
        found = f"{self.describe()}, chosen by {self.chosen_by}"
        return f"{found}: {self.problem}" if self.problem else found


def version_of(path: str) -> str | None:
    """`gcc 13.3.0` or `clang 18.1.3`: the family from --version, the number from -dumpfullversion."""
    code, text = proc.probe([path, "--version"])
    if code != 0 or not text:
        return None
    first = text.splitlines()[0]
    if "clang" in first:
        m = re.search(r"version (\d+(?:\.\d+)+)", first)
        return f"clang {m.group(1)}" if m else None
    code, number = proc.probe([path, "-dumpfullversion", "-dumpversion"])
    return f"gcc {number.splitlines()[0].strip()}" if code == 0 and number else None


def shared_libstdcxx(path: str) -> str | None:
    """Where the compiler's shared libstdc++ is: GCC prints the bare name when it has none."""
    code, text = proc.probe([path, "-print-file-name=libstdc++.so"])
    found = text.splitlines()[-1].strip() if code == 0 and text else ""
    return found if os.path.isabs(found) and os.path.exists(found) else None


def probe(path: str) -> tuple[cxxruntime.CxxRuntime | None, str | None]:
    """Link the probe library with the compiler and read its C++ runtime; (verdict, why it could not)."""
    with tempfile.TemporaryDirectory(prefix="blackwell-stack-cxx-probe-") as tmp:
        source, library = Path(tmp) / "probe.cc", Path(tmp) / "probe.so"
        source.write_text(_PROBE)
        code, text = proc.probe([path, "-shared", "-fPIC", "-O2", str(source), "-o", str(library)], cwd=tmp)
        if code != 0 or not library.is_file():
            last = text.splitlines()[-1] if text else f"exit code {code}"
            return None, f"cannot link a shared C++ library ({last})"
        try:
            return cxxruntime.classify(elf.parse(library.read_bytes(), str(library))), None
        except StackError as exc:
            return None, f"the library it linked cannot be read: {exc.message}"


def _locate(role: Role, environ: Mapping[str, str], cxx: Compiler | None) -> tuple[str | None, str, str | None]:
    """(absolute path, how it was chosen, problem) for one role."""
    value = environ.get(role.variable, "").strip()
    if not value:
        if role.on_path is None and cxx is not None:
            return cxx.path, f"the c++ compiler ({cxx.chosen_by})", None
        name = role.on_path or "c++"
        found = shutil.which(name, path=environ.get("PATH"))
        return (found and os.path.abspath(found)), f"{name} on PATH", None if found else f"no {name} on PATH"
    words = shlex.split(value)
    if len(words) != 1:
        return None, f"{role.variable}={value}", (f"{role.variable}={value!r} holds more than a compiler; give only its "
                                                  "path (flags belong to the recipe)")
    found = shutil.which(words[0], path=environ.get("PATH"))
    chosen = f"{role.variable}={value}"
    return (found and os.path.abspath(found)), chosen, None if found else f"{chosen}: no such program"


def find(environ: Mapping[str, str] | None = None) -> list[Compiler]:
    """Every role's compiler, tried: C, C++ and nvcc's host C++ compiler."""
    environ = os.environ if environ is None else environ
    out: list[Compiler] = []
    cxx: Compiler | None = None
    for role in ROLES:
        path, chosen, problem = _locate(role, environ, cxx)
        if path is None or problem:
            compiler = Compiler(role, None, chosen, problem=problem or f"{chosen} not found")
        elif cxx is not None and path == cxx.path and role.links_cxx:
            compiler = dataclasses.replace(cxx, role=role, chosen_by=chosen)
        else:
            compiler = _tried(role, path, chosen)
        out.append(compiler)
        if role.variable == "CXX":
            cxx = compiler
    return out


def _tried(role: Role, path: str, chosen: str) -> Compiler:
    version = version_of(path)
    if not role.links_cxx:
        return Compiler(role, path, chosen, version, problem=None if version else f"{path} --version gave nothing")
    libstdcxx = shared_libstdcxx(path)
    runtime, problem = probe(path)
    if runtime is not None and not runtime.ok:
        why = "it has no shared libstdc++ (`-print-file-name=libstdc++.so` prints the bare name)" if libstdcxx is None \
            else "it links libstdc++ statically"
        problem = (f"a library it links carries its own C++ runtime ({runtime.verdict}: {runtime.defined_count} runtime "
                   f"symbols defined, libstdc++.so.6 {'linked' if runtime.runtime_library else 'not linked'}): {why}; "
                   "such a wheel crashes SGLang at start-up")
    return Compiler(role, path, chosen, version, libstdcxx, problem)


def defines(compilers: list[Compiler]) -> dict[str, str]:  # the build uses exactly the compilers tried
    return {c.role.define: c.path for c in compilers if c.ok and c.path}


def record(compilers: list[Compiler]) -> dict[str, str]:
    return {c.role.name: c.describe() for c in compilers if c.ok}
