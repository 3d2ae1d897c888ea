"""`blackwell-stack kernel ...` on real files: patch dry runs, build refusals with real tools, plan's section."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.cli import run
from support.kernel_probe import probe_plan, probe_project

from blackwell_stack.kernel.inputs import patch_series, recipe
from blackwell_stack.kernel.plan import plan_section

SERIES = patch_series.load_series()


run_cli = functools.partial(run, "kernel")


def _find(lines: list[str], block: list[str]) -> int | None:
    """0-based start of the last occurrence of `block` in `lines`, or None."""
    starts = [i for i in range(len(lines) - len(block) + 1) if lines[i : i + len(block)] == block]
    return starts[-1] if starts else None


def synthesize_base(patches) -> dict[str, str]:
    """File texts on which the whole series applies in order, made of the hunks' own old text.

    Each hunk whose old text is not there yet is appended (after a filler line)
    to the base and to the running text, which then gets the hunk's new text.
    """
    base: dict[str, list[str]] = {}
    current: dict[str, list[str]] = {}
    for patch in patches:
        for fp in patch.files:
            if fp.old_path is None:
                continue
            b, c = base.setdefault(fp.path, []), current.setdefault(fp.path, [])
            for h in fp.hunks:
                at = _find(c, h.old)
                if at is None:
                    filler = [f"# upstream text before {patch.name} hunk {h.index}"]
                    b += filler + h.old
                    c += filler + h.old
                    at = len(c) - len(h.old)
                c[at : at + len(h.old)] = h.new
    return {path: "\n".join(lines) + "\n" for path, lines in base.items()}


def make_tree(root: Path, texts: dict[str, str], version: str = "0.3.21") -> Path:
    kdir = root / "sglang" / "sgl-kernel"
    (kdir / "python" / "sgl_kernel").mkdir(parents=True)
    for rel, text in {"CMakeLists.txt": "project(sgl-kernel)\n", **texts}.items():
        (kdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (kdir / rel).write_text(text)
    (kdir / "pyproject.toml").write_text(f'[project]\nname = "sgl-kernel"\nversion = "{version}"\n')
    return root / "sglang"


def snapshot(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): p.read_text() for p in sorted(tree.rglob("*")) if p.is_file()}


@pytest.fixture
def clean_tree(tmp_path) -> Path:
    return make_tree(tmp_path, synthesize_base(SERIES))


def test_series_applicable_then_applied_then_idempotent(clean_tree):
    report = patch_series.check_series(clean_tree)
    assert set(report.patch_states().values()) == {patch_series.APPLICABLE}
    assert len(report.hunks) == sum(len(fp.hunks) for p in SERIES for fp in p.files)
    _, applied = patch_series.apply_series(clean_tree)
    assert applied == [p.name for p in SERIES]
    after = patch_series.check_series(clean_tree)
    assert set(after.patch_states().values()) == {patch_series.APPLIED}
    # Each applied hunk is reported at the line where its new text stands (the last patch's tree: 0009 is last).
    final = {fp.path: fp for p in SERIES[-1:] for fp in p.files}
    for r in after.hunks:
        if r.patch == SERIES[-1].name and r.file in final:
            new = final[r.file].hunks[r.hunk - 1].new
            text = (clean_tree / "sgl-kernel" / r.file).read_text().splitlines()
            assert text[r.line - 1 : r.line - 1 + len(new)] == new, r
    before = snapshot(clean_tree)
    assert patch_series.apply_series(clean_tree)[1] == []  # already applied: skipped, nothing written
    assert snapshot(clean_tree) == before


def test_the_report_is_read_whatever_the_callers_patch_settings(clean_tree):
    # GNU patch quotes file names as QUOTING_STYLE says, translates its report, and has a POSIX mode.
    env = {**os.environ, "QUOTING_STYLE": "c", "POSIXLY_CORRECT": "1", "LANGUAGE": "de", "LC_ALL": "de_DE.UTF-8"}
    data = json.loads(run_cli("patches", "check", "--src", str(clean_tree), "--json", env=env).stdout)
    assert set(data["patches"].values()) == {"applicable"}


def test_checkout_given_as_sgl_kernel_dir(clean_tree):
    assert patch_series.kernel_dir(clean_tree / "sgl-kernel") == patch_series.kernel_dir(clean_tree)


def test_patches_check_cli_reports_every_hunk(clean_tree):
    result = run_cli("patches", "check", "--src", str(clean_tree))
    assert result.returncode == 0, result.stderr
    for patch in SERIES:
        assert patch.name in result.stdout
    data = json.loads(run_cli("patches", "check", "--src", str(clean_tree), "--json").stdout)
    assert set(data["patches"].values()) == {"applicable"}


def test_without_gnu_patch_the_check_says_what_to_install(clean_tree, tmp_path):
    # No patch on PATH, then a real program that is not GNU patch under its name (coreutils' true).
    missing = run_cli("patches", "check", "--src", str(clean_tree), env=_env(_tool_path(tmp_path)))
    assert missing.returncode == 6 and "patch is not on PATH" in missing.stderr and "apt-get install patch" in missing.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "patch").symlink_to(shutil.which("true"))
    wrong = run_cli("patches", "check", "--src", str(clean_tree), env=_env(str(other)))
    assert wrong.returncode == 6 and "is not GNU patch (true (GNU coreutils)" in wrong.stderr, wrong.stderr
    build = run_cli("build", "--src", str(clean_tree), "--dry-run", env=_env(str(other)))
    assert build.returncode == 6 and "[BAD] patch:" in build.stderr and "is not GNU patch" in build.stderr


def test_conflict_names_patch_file_hunk_and_upstream_text(clean_tree):
    cmake = clean_tree / "sgl-kernel" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().replace("cmake_policy(SET CMP0177 NEW)", "cmake_policy(SET CMP0177 OLD) # changed upstream"))
    result = run_cli("patches", "check", "--src", str(clean_tree))
    assert result.returncode == 1
    assert "0001-cmake-guard-CMP0169-CMP0177-policies: CMakeLists.txt hunk 1" in result.stdout
    assert "+cmake_policy(SET CMP0177 OLD) # changed upstream" in result.stdout  # what upstream has now
    assert "-cmake_policy(SET CMP0177 NEW)" in result.stdout  # what the patch expects
    # build refuses at the patch check, before the toolchain or anything else, and changes nothing
    before = snapshot(clean_tree)
    build = run_cli("build", "--src", str(clean_tree), "--dry-run")
    assert build.returncode == 7 and "does not apply" in build.stderr and "0001" in build.stderr
    assert snapshot(clean_tree) == before


def test_half_applied_series_is_refused(clean_tree):
    first = SERIES[0]
    patch_series.apply_series(clean_tree, [first])
    second = [p for p in SERIES if any(fp.path == "CMakeLists.txt" for fp in p.files)][1]
    patch_series.apply_series(clean_tree, [second])
    report = patch_series.check_series(clean_tree)
    states = report.patch_states()
    assert states[first.name] == states[second.name] == patch_series.APPLIED
    assert patch_series.APPLICABLE in states.values()
    _, applied = patch_series.apply_series(clean_tree)  # the rest is applied, the applied ones skipped
    assert first.name not in applied and second.name not in applied
    assert set(patch_series.check_series(clean_tree).patch_states().values()) == {patch_series.APPLIED}


@pytest.mark.network
def test_fix4_on_the_real_flash_attn_from_the_pypi_wheel(pypi_file, tmp_path):
    wheel = pypi_file("sgl-kernel", "0.3.21", "*manylinux2014_x86_64.whl")
    with zipfile.ZipFile(wheel) as zf:
        real = zf.read("sgl_kernel/flash_attn.py").decode()
    tree = make_tree(tmp_path, {"python/sgl_kernel/flash_attn.py": real})
    fix4 = [p for p in SERIES if p.name.startswith("0004")]
    report = patch_series.check_series(tree, fix4)
    assert report.patch_states() == {fix4[0].name: patch_series.APPLICABLE}
    patch_series.apply_series(tree, fix4)
    patched = (tree / "sgl-kernel/python/sgl_kernel/flash_attn.py").read_text()
    assert "flash_ops = None" in patched and patched != real
    assert patch_series.check_series(tree, fix4).patch_states() == {fix4[0].name: patch_series.APPLIED}


def _tool_path(tmp_path, *tools) -> str:
    """A PATH holding only the named real tools (symlinks), so the checks see exactly those."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for tool in tools:
        real = shutil.which(tool)
        if real:
            (bindir / tool).symlink_to(real)
    return str(bindir)


def _env(path: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CUDACXX"}
    env["PATH"] = path
    return env


def test_build_refuses_wrong_toolchain_before_compiling(clean_tree, tmp_path):
    system_python = "/usr/bin/python3"
    if not Path(system_python).exists() or subprocess.run([system_python, "-c", "import torch"], capture_output=True, check=False).returncode == 0:
        pytest.skip("needs a real Python without torch at /usr/bin/python3")
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    cmake_version = subprocess.run([cmake, "--version"], capture_output=True, text=True, check=True).stdout.split()[2]
    before = snapshot(clean_tree)
    result = run_cli(
        "build", "--src", str(clean_tree), "--python", system_python, "--out", str(tmp_path / "dist"),
        env=_env(_tool_path(tmp_path, "cmake", "ninja", "nvcc")),
    )
    assert result.returncode == 6, result.stderr
    err = result.stderr
    assert "nothing was compiled" in err
    # The fix installs the default stack's lock (its torch) into that venv.
    assert "[BAD] torch: not importable" in err and "uv sync --frozen" in err and "stacks/stable" in err
    if tuple(int(x) for x in cmake_version.split(".")[:2]) < (3, 31):
        assert "[BAD] cmake: " in err and f"cmake: {cmake_version} is too old (needs >= 3.31)" in err
        assert "pip install 'cmake>=3.31'" in err
    if shutil.which("nvcc"):
        assert "[ok ] nvcc:" in err and "CUDA 13." in err  # this machine's real nvcc 13 passes
    assert snapshot(clean_tree) == before  # no patch applied
    assert not (tmp_path / "dist").exists()


def test_build_refuses_missing_nvcc(clean_tree, tmp_path):
    result = run_cli("build", "--src", str(clean_tree), "--dry-run", env=_env(_tool_path(tmp_path, "cmake", "ninja")))
    assert result.returncode == 6
    assert "[BAD] nvcc: not found (no CUDACXX, no nvcc on PATH)" in result.stderr
    assert "CUDA 13.0 toolkit" in result.stderr


def test_build_unknown_arch_lists_valid_ones(clean_tree):
    result = run_cli("build", "--src", str(clean_tree), "--arch", "7.5", "--dry-run")
    assert result.returncode == 2
    assert "unknown CUDA architecture 7.5; valid: " + ", ".join(recipe.load()["supported_archs"]) in result.stderr


def test_build_warns_on_other_version(tmp_path):
    tree = make_tree(tmp_path, synthesize_base(SERIES), version="0.3.20")
    result = run_cli("build", "--src", str(tree), "--dry-run", "--python", "/nonexistent/python")
    assert "says sgl-kernel 0.3.20, the pin is 0.3.21" in result.stderr
    assert result.returncode == 6  # and the toolchain still refuses (no such python)


def test_build_refuses_a_directory_that_is_not_a_checkout(tmp_path):
    result = run_cli("build", "--src", str(tmp_path), "--dry-run")
    assert result.returncode == 2 and "neither an sglang checkout" in result.stderr


def test_plan_section_shows_pin_patches_recipe_and_jobs():
    from blackwell_stack.data import stack as stack_data

    sec = plan_section([stack_data.load("current"), stack_data.load()])
    assert sec is not None and sec.title.endswith(f"(stacks: {stack_data.default_name()})")
    names = [i.name for i in sec.items]
    assert names[0].startswith("sglang source")
    assert "v0.5.9" in sec.items[0].value
    assert sum(n.startswith("patch ") for n in names) == len(SERIES)
    assert any(n == "recipe cmake flags" and "-DSGL_KERNEL_CUDA_ARCHS=12.0a" in i.value for n, i in zip(names, sec.items))
    assert any(n.startswith("job plan") for n in names)
    assert any(c.startswith("blackwell-stack kernel build") for c in sec.commands)


# --- the build runner on a real (tiny) scikit-build-core project --------------------------------

@pytest.mark.slow
def test_build_runner_passes_the_recipe_to_scikit_build_core(tmp_path):
    from blackwell_stack.kernel.build import execute

    kdir = probe_project(tmp_path, "int probe(void) { return 120; }\n")
    plan = probe_plan(kdir, tmp_path / "dist")
    wheel = execute.run_build(plan)
    assert wheel.name.startswith("sgl_kernel-0.3.21-") and wheel.suffix == ".whl"
    with zipfile.ZipFile(wheel) as zf:
        seen = zf.read("sgl_kernel/seen.txt").decode()
        record = zf.read("sgl_kernel/_build_info.json").decode()  # patch 0009's rule, fed by the plan
    assert seen.strip() == f"archs=12.0a threads={plan.job_plan.threads} fp4=ON env=12.0a jobs={plan.job_plan.jobs}"
    assert record == plan.build_info and plan.build_info_path.read_text() == record
    log = plan.log_path.read_text()
    assert log.startswith("$ ") and "--no-build-isolation" in log and "[1/2]" in log  # ninja steps reach the log


@pytest.mark.slow
def test_build_failure_exits_7_with_the_log(tmp_path):
    from blackwell_stack.errors import BuildError
    from blackwell_stack.kernel.build import execute

    kdir = probe_project(tmp_path, "int probe(void) { return 120 }\n")  # a real compile error
    plan = probe_plan(kdir, tmp_path / "dist")
    with pytest.raises(BuildError) as exc:
        execute.run_build(plan)
    assert exc.value.code == 7
    assert str(plan.log_path) in exc.value.hint and "error" in exc.value.message


def test_cmake_beside_the_venv_python_wins_over_path(tmp_path):
    """scikit-build-core uses the venv's cmake/ninja (pip packages) before PATH's; so does the check."""
    from blackwell_stack.kernel.build import toolchain

    real = shutil.which("cmake")
    if real is None:
        pytest.skip("cmake is not installed")
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    (venv_bin / "cmake").symlink_to(real)
    assert toolchain.build_tool("cmake", str(venv_bin / "python")) == str(venv_bin / "cmake")
    assert toolchain.build_tool("cmake", str(tmp_path / "elsewhere" / "python")) == real
    assert str(venv_bin / "cmake") in toolchain.check_tool("cmake", str(venv_bin / "python")).found


# --- the series check (GNU patch) on difflib's own diffs, moved by an offset ---------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process


@st.composite
def edited_file(draw):
    """Unique lines (no ambiguous matches), an edited copy, and lines to shift the old file by."""
    old = [f"line {n}" for n in draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=60, unique=True))]
    new, fresh = [], iter(range(10**6 + 1, 10**7))
    for line in old:
        action = draw(st.sampled_from(["keep", "keep", "keep", "drop", "change", "insert"]))
        if action == "keep":
            new.append(line)
        elif action == "change":
            new.append(f"changed {next(fresh)}")
        elif action == "insert":
            new += [line, f"added {next(fresh)}"]
    shift = [f"shift {n}" for n in range(draw(st.integers(0, 5)))]
    return old, new, shift


@settings(max_examples=40, deadline=None)
@given(edited_file())
def test_difflib_diffs_check_and_apply_like_patch(tmp_path_factory, case):
    import difflib

    old, new, shift = case
    if old == new:
        return
    # Every hunk gets its full context: GNU patch without fuzz pins a hunk short of leading (trailing)
    # context to the start (end) of the file, so only such hunks may move.
    edges = [f"edge {n}" for n in range(3)]
    old, new = edges + old + edges, edges + new + edges
    tmp = tmp_path_factory.mktemp("diff")
    body = list(difflib.unified_diff(old, new, "a/f.txt", "b/f.txt", lineterm="", n=3))
    (tmp / "0001-x.patch").write_text("an edit\n\n" + "\n".join(body) + "\n")
    patch = patch_series.parse_patch(tmp / "0001-x.patch")
    assert patch.description == "an edit"
    tree = make_tree(tmp, {"f.txt": "\n".join(shift + old) + "\n"})
    report, applied = patch_series.apply_series(tree, [patch])
    assert applied == [patch.name] and {r.state for r in report.hunks} == {patch_series.APPLICABLE}
    assert all(r.offset == len(shift) for r in report.hunks)
    after = (tree / "sgl-kernel/f.txt").read_text()
    assert after == "\n".join(shift + new) + "\n"
    again = patch_series.check_series(tree, [patch])
    assert set(again.patch_states().values()) == {patch_series.APPLIED}


# --- the torch the build compiles against: pinned, or another one named on purpose ----------------


def _torch_here() -> str:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip("needs torch in this interpreter (the test-server extra installs the CPU build)")
    return probe.stdout.strip()


def test_another_torch_needs_the_override_and_the_override_is_recorded(clean_tree, tmp_path):
    found = _torch_here()
    args = ("build", "--src", str(clean_tree), "--python", sys.executable, "--out", str(tmp_path / "dist"), "--dry-run", "--json")
    plain = run_cli(*args)
    data = json.loads(plain.stdout)  # the whole plan is printed whatever the verdicts
    torch = next(c for c in data["checks"] if c["name"] == "torch")
    from blackwell_stack.data import stack as stack_data

    locked = stack_data.load(stack_data.default_name()).versions()["torch"]  # the default stack's torch
    assert not torch["ok"] and f"stacks/stable/uv.lock: {locked}" in torch["found"]
    assert f"--allow-torch {found}" in torch["fix"]
    assert data["build_info"]["torch"] == {"built_against": found, "version": locked,
                                           "source": "stacks/stable/uv.lock", "override": None}
    assert plain.returncode == 6 and data["blockers"][0]["code"] == 6

    allowed = run_cli(*args, "--allow-torch", found)
    data = json.loads(allowed.stdout)
    torch = next(c for c in data["checks"] if c["name"] == "torch")
    assert torch["ok"] and found in torch["found"] and "--allow-torch" in torch["found"]
    assert data["build_info"]["torch"]["built_against"] == found
    assert data["build_info"]["torch"]["override"] == f"--allow-torch {found}"
    assert f"building against torch {found} instead of the stack's" in allowed.stderr  # logged
    assert "--allow-torch" in json.dumps(data["warnings"])
    cuda = next(c for c in data["checks"] if c["name"] == "torch CUDA")
    if not found.endswith("+cu130"):  # naming a version waives nothing else: a CPU torch still cannot build it
        assert not cuda["ok"] and allowed.returncode == 6
    assert not (tmp_path / "dist").exists()


def test_dry_run_prints_the_plan_and_every_verdict(clean_tree, tmp_path):
    result = run_cli("build", "--src", str(clean_tree), "--python", "/nonexistent/python", "--out", str(tmp_path / "dist"),
                     "--dry-run", "--memory-gib", "1")
    assert "sgl-kernel build plan" in result.stdout and "\ncommand:\n" in result.stdout and "build record: " in result.stdout
    assert "[BAD] python: /nonexistent/python not found" in result.stdout
    # The command a line per argument, a shell's continuation between: none of the thousand-character lines it was.
    lines = result.stdout.splitlines()
    command = lines[lines.index("command:") + 1:]
    assert command[0].startswith("  ") and command[0].endswith(" \\") and any("-D" in line for line in command)
    assert max(map(len, lines)) < 400, max(lines, key=len)
    assert "not enough memory to compile sgl-kernel" in result.stderr  # the memory verdict too, not only the first
    assert "a build would stop here (2 problem(s) above)" in result.stderr
    assert result.returncode == 6 and not (tmp_path / "dist").exists()
