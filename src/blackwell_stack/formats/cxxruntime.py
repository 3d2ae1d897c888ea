"""Which C++ runtime an ELF library uses: the process's shared libstdc++, or a copy of its own.

A torch extension must use the C++ runtime of the process it is loaded into
(torch's libstdc++.so.6). A library linked with a static libstdc++ (a
compiler that has only libstdc++.a, or -static-libstdc++) carries its own
copy: it defines and exports `__cxa_throw`, `std::terminate()` and the rest,
and has no libstdc++.so.6 in DT_NEEDED. Two runtimes in one process disagree
on exceptions and type identity: sgl-kernel built that way crashed SGLang at
start-up (`torch.ops.deep_gemm.init`, a segmentation fault), and a C++
exception thrown in it ended the process instead of reaching Python.

Read from the dynamic symbol table and DT_NEEDED only, so it works on any
ELF `elf.parse` reads, without running anything.
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from blackwell_stack.errors import StackError
from blackwell_stack.formats import elf, wheelzip

# Libraries that are a C++ runtime (GNU's, LLVM's).
RUNTIME_LIBRARIES = ("libstdc++.so.6", "libc++.so.1")

# The core of a C++ runtime: exception handling, which exists once per runtime. A library that defines and
# exports one of these has a runtime of its own. (Some runtime symbols are defined by libraries that do link
# libstdc++.so.6: manylinux toolchains link the helpers newer than the system's libstdc++ statically, e.g.
# std::__throw_bad_array_new_length in torch's libc10.so; those are counted, never decisive.)
_RUNTIME_CORE = frozenset({
    "__cxa_throw", "__cxa_rethrow", "__cxa_begin_catch", "__cxa_end_catch", "__cxa_allocate_exception",
    "__cxa_free_exception", "__gxx_personality_v0", "_ZSt9terminatev",
})

# Symbols only a C++ runtime defines: the exception ABI, std::terminate, libstdc++'s __throw_* helpers,
# the type-info classes and the non-template exception classes. Template instances (std::vector<int>::...)
# are not among them: every C++ library may define those as weak symbols.
_RUNTIME_DEFINITION = re.compile(
    r"^(?:__cxa_(?!finalize$|atexit$|thread_atexit_impl$)\w+"  # glibc, not the C++ runtime, defines these three
    r"|__gxx_personality_v0"
    r"|_ZSt9terminatev|_ZSt13set_terminate\w*|_ZSt10unexpectedv"
    r"|_ZSt\d+__throw_\w+"
    r"|_ZT[VIS]N10__cxxabiv1\w+|_ZN10__cxxabiv1\w+"
    r"|_ZN?K?St(?:9exception|9bad_alloc|13runtime_error|11logic_error|12length_error|12out_of_range)\w*"
    r"|_ZT[VIS]St(?:9exception|9bad_alloc|13runtime_error|11logic_error)\w*)$"
)

# Symbols of the C++ runtime a library may use (defined or undefined): std::, the exception ABI,
# operator new and delete.
_RUNTIME_USE = re.compile(
    r"^(?:_ZN?K?St|_ZT[VIS]N?St|__cxa_(?!finalize$|atexit$|thread_atexit_impl$)|__gxx_personality_v0$"
    r"|_Znw|_Zna|_Zdl|_Zda|_ZT[VIS]N10__cxxabiv1)"
)

# Shown first when a library defines them: the names a person knows the runtime by.
_HEADLINE = {"__cxa_throw": 0, "_ZSt9terminatev": 1, "__gxx_personality_v0": 2, "__cxa_begin_catch": 3}

_READABLE = {"_ZSt9terminatev": "std::terminate()"}

SHARED, EMBEDDED, UNLINKED, NONE = "shared", "embedded", "unlinked", "none"
FIX = ("link it with a compiler whose libstdc++ is a shared library (`CXX -print-file-name=libstdc++.so` prints a "
        "path, not the bare name), without -static-libstdc++")


@dataclass(frozen=True)
class CxxRuntime:
    """What one library does about the C++ runtime.

    verdict: `shared` (links libstdc++.so.6 and defines none of its core), `none` (shares no C++ runtime
    with the process: no C++, or one linked in whole and hidden), `embedded` (defines and exports the
    runtime's exception handling itself) or `unlinked` (refers to runtime symbols but links no runtime:
    they resolve to whichever runtime the process loaded first). The last two fail in a torch extension.
    """

    verdict: str
    runtime_library: str | None
    defined: tuple[str, ...]  # runtime symbols it defines and exports, first few, sorted
    defined_count: int
    used_count: int  # C++ runtime symbols it refers to or defines

    @property
    def ok(self) -> bool:
        return self.verdict in (SHARED, NONE)

    def message(self, name: str) -> str:
        if self.verdict == EMBEDDED:
            shown = ", ".join(_READABLE.get(n, n) for n in self.defined[:3]) + (", ..." if self.defined_count > 3 else "")
            linked = (f"besides linking {self.runtime_library}" if self.runtime_library
                      else "and has no libstdc++.so.6 in DT_NEEDED")
            return (f"{name} carries its own C++ runtime: it defines and exports {self.defined_count} of its symbols "
                    f"({shown}) {linked}; loaded into torch's process, two C++ runtimes disagree on exceptions and "
                    "types (a crash at import, or an exception that ends the process)")
        if self.verdict == UNLINKED:
            return (f"{name} refers to C++ runtime symbols but links no C++ runtime (no libstdc++.so.6 in DT_NEEDED): "
                    "they resolve to whichever runtime the process loaded first")
        return f"{name}: C++ runtime {self.verdict}" + (f" ({self.runtime_library})" if self.runtime_library else "")

    def to_json(self) -> dict:
        # verdict and ok lead the --json object, then every field (a new field becomes a key)
        return {"verdict": self.verdict, "ok": self.ok, **asdict(self), "defined": list(self.defined)}


def classify(e: elf.ElfFile) -> CxxRuntime:
    """The C++ runtime verdict of one ELF, from its DT_NEEDED and dynamic symbol table."""
    needed = e.needed
    runtime = next((n for n in needed if n in RUNTIME_LIBRARIES), None)
    exported: set[str] = set()
    used = references = 0
    for s in e.dynamic_symbols():
        if not _RUNTIME_USE.match(s.name):
            continue
        used += 1
        # A weak reference (__cxa_pure_virtual in a library whose runtime is linked in and hidden) need not
        # resolve at all: only strong ones must come from a runtime.
        if not s.defined and not s.weak:
            references += 1
        # Functions only: an executable's copy relocations define the runtime's typeinfo objects too.
        if (s.defined and s.binding != elf.STB_LOCAL and s.type in (elf.STT_FUNC, elf.STT_GNU_IFUNC)
                and _RUNTIME_DEFINITION.match(s.name)):
            exported.add(s.name)
    if e.soname in RUNTIME_LIBRARIES:  # the runtime itself
        return CxxRuntime(SHARED, e.soname, (), 0, used)
    defined = tuple(sorted(exported, key=lambda n: (n not in _HEADLINE, _HEADLINE.get(n, 0), n)))
    if exported & _RUNTIME_CORE:
        verdict = EMBEDDED
    elif references and runtime is None:
        verdict = UNLINKED
    elif runtime:
        verdict = SHARED
    else:
        verdict = NONE  # no C++, or a runtime linked in whole and hidden: nothing shared with the process
    return CxxRuntime(verdict, runtime, defined[:8], len(defined), used)


def check_wheel(path: str | Path) -> list[tuple[str, CxxRuntime]]:
    """Every ELF member of a wheel (or directory, or one library) with its verdict, by name."""
    source = wheelzip.open_source(path)
    out = []
    for member in sorted(source.elf_members, key=lambda m: m.name):
        with source.open_elf(member.name) as e:
            out.append((member.name, classify(e)))
    return out


def main() -> int:
    """`python -m blackwell_stack.formats.cxxruntime WHEEL...`: the check the Nix derivation runs on its wheel
    (standard library only, like kernel/jobs.py); exit 1 when a library carries its own C++ runtime."""
    names = sys.argv[1:]
    if not names:
        print("usage: python -m blackwell_stack.formats.cxxruntime WHEEL_OR_DIRECTORY...", file=sys.stderr)
        return 2
    failed = False
    for name in names:
        try:
            found = check_wheel(name)
        except StackError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 2
        if not found:
            print(f"{name}: no compiled library in it", file=sys.stderr)
            failed = True
        for member, verdict in found:
            print(("ok   " if verdict.ok else "FAIL ") + verdict.message(f"{name}:{member}"))
            failed = failed or not verdict.ok
    if failed:
        print(f"fix: {FIX}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
