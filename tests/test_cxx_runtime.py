"""A library's C++ runtime (formats/cxxruntime.py), on libraries the real g++ links, on real wheels, and in the
commands that report it (`inspect`, `doctor abi`, the check the Nix derivation runs).

The signature of the wheel that crashed SGLang at start-up (every library defines and exports __cxa_throw and
std::terminate, none needs libstdc++.so.6) is what `g++ -shared -static-libstdc++` gives: the test's "old link
flags". A plain `g++ -shared` is the fixed link.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from support.cli import run

from blackwell_stack.errors import BuildError
from blackwell_stack.formats import cxxruntime, elf, wheelzip
from blackwell_stack.kernel.build import execute

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

THROWS = """#include <stdexcept>
#include <string>
extern "C" int probe(int n) { std::string s(n, 'x'); if (n > 3) throw std::runtime_error(s); return (int)s.size(); }
"""


def gxx() -> str:
    found = shutil.which("g++")
    if found is None:
        pytest.skip("g++ is needed (scripts/setup-system installs it)")
    return found


def link(tmp_path: Path, name: str, *flags: str, source: str = THROWS, lang: str = "c++") -> Path:
    src = tmp_path / f"{name}.{'c' if lang == 'c' else 'cc'}"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    compiler = gxx() if lang == "c++" else (shutil.which("gcc") or pytest.skip("gcc is needed"))
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", *flags, str(src), "-o", str(out)], check=True,
                   capture_output=True, timeout=120)
    return out


def verdict(path: Path) -> cxxruntime.CxxRuntime:
    return cxxruntime.classify(elf.parse(path.read_bytes(), str(path)))


def test_the_old_link_flags_embed_the_runtime_and_the_plain_link_shares_it(tmp_path):
    old = verdict(link(tmp_path, "old", "-static-libstdc++"))
    assert old.verdict == cxxruntime.EMBEDDED and not old.ok and old.runtime_library is None
    assert old.defined[:2] == ("__cxa_throw", "_ZSt9terminatev") and old.defined_count > 50
    assert "carries its own C++ runtime" in old.message("x.so") and "std::terminate()" in old.message("x.so")
    fixed = verdict(link(tmp_path, "fixed"))
    assert fixed.verdict == cxxruntime.SHARED and fixed.ok and fixed.runtime_library == "libstdc++.so.6"
    assert fixed.defined_count == 0  # weak template instances (std::string's) are not the runtime
    plain_c = verdict(link(tmp_path, "c", source="int probe(void) { return 1; }\n", lang="c"))
    assert plain_c.verdict == cxxruntime.NONE and plain_c.ok


def test_runtime_symbols_left_to_the_process_are_unlinked(tmp_path):
    """deep_gemm_cpp's other half: std:: symbols it leaves undefined with no libstdc++.so.6 to resolve them."""
    # The gcc driver compiles C++ but links no libstdc++ (g++ would add -lstdc++).
    lib = verdict(link(tmp_path, "unlinked", "-x", "c++", lang="c-driver"))
    assert lib.verdict == cxxruntime.UNLINKED and not lib.ok and "links no C++ runtime" in lib.message("x.so")


def test_pypi_sgl_kernel_shares_the_runtime_in_every_library(pypi_file):
    """The known-good build: PyPI's sgl-kernel 0.3.21 needs libstdc++.so.6 and defines none of it."""
    wheel = pypi_file("sgl-kernel", "0.3.21", "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl")
    found = cxxruntime.check_wheel(wheel)
    assert len(found) >= 8 and all(v.verdict == cxxruntime.SHARED for _, v in found), \
        [(n, v.verdict) for n, v in found if v.verdict != cxxruntime.SHARED]


cli = functools.partial(run, cwd=REPO)


def test_inspect_fails_a_library_with_its_own_runtime(tmp_path):
    old, fixed = link(tmp_path, "old", "-static-libstdc++"), link(tmp_path, "fixed")
    bad = cli("inspect", str(old), "--json")
    report = json.loads(bad.stdout)
    assert bad.returncode == 1 and report["problems"][0]["check"] == "C++ runtime"
    assert report["files"][0]["cxx_runtime"]["verdict"] == "embedded"
    human = cli("inspect", str(old))
    assert human.returncode == 1 and "FAIL C++ runtime" in human.stdout and "EMBEDDED" in human.stdout
    good = cli("inspect", str(fixed), "--json")
    assert good.returncode == 0 and json.loads(good.stdout)["problems"] == []


def test_the_derivations_install_check_refuses_the_old_link(tmp_path):
    """`python -m blackwell_stack.formats.cxxruntime`, as pkgs/sgl-kernel/default.nix runs it on its wheel: with
    only the files the derivation lists (cxxRuntimeCheckFiles) on its path."""
    nix = (REPO / "pkgs/sgl-kernel/default.nix").read_text()
    listed = re.findall(r'"(blackwell_stack/[^"]+\.py)"', nix.split("cxxRuntimeCheckFiles = [", 1)[1].split("];", 1)[0])
    for rel in listed:
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "src" / rel, tmp_path / "src" / rel)
    run = lambda *paths: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "blackwell_stack.formats.cxxruntime", *map(str, paths)], capture_output=True, text=True,
        timeout=120, env={"PYTHONPATH": str(tmp_path / "src"), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    old, fixed = link(tmp_path, "old", "-static-libstdc++"), link(tmp_path, "fixed")
    refused = run(old)
    assert refused.returncode == 1 and "FAIL" in refused.stdout and "fix:" in refused.stderr
    assert run(fixed).returncode == 0
    assert run().returncode == 2 and run(tmp_path / "missing").returncode == 2


def _wheel_with(tmp_path: Path, library: Path) -> Path:
    """A wheel (zip) whose one library is `library`: what a build that linked it would pack."""
    import zipfile

    wheel = tmp_path / "out" / "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl"
    wheel.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(library, "sgl_kernel/common_ops.abi3.so")
        zf.writestr("sgl_kernel/__init__.py", "")
        zf.writestr("sgl_kernel-0.3.21.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp310-abi3-linux_x86_64\n")
    return wheel


def test_kernel_build_refuses_to_call_such_a_wheel_built(tmp_path):
    wheel = _wheel_with(tmp_path, link(tmp_path, "old", "-static-libstdc++"))
    with pytest.raises(BuildError) as err:
        execute.check_wheel(wheel)
    assert "would crash SGLang" in err.value.message and "sgl_kernel/common_ops.abi3.so" in err.value.message
    assert "CXX=/usr/bin/g++" in (err.value.hint or "")
    assert not wheel.exists() and wheel.with_name(wheel.name + ".rejected").is_file()  # no dist/*.whl takes it
    good = _wheel_with(tmp_path, link(tmp_path, "fixed"))
    execute.check_wheel(good)
    assert good.is_file()
    assert [n for n, _ in cxxruntime.check_wheel(good)] == [m.name for m in wheelzip.open_source(good).elf_members]
