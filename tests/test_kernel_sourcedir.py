"""Source directories checked by hash, fetched from a real server, and the FetchContent settings both
front ends hand CMake: `kernel sources check/fetch`, `kernel build --sources`, lib/kernel-sources.nix."""

from __future__ import annotations

import copy
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.kernel_probe import minimal_checkout

from blackwell_stack.errors import HashMismatch, NetworkError, StackError
from blackwell_stack.kernel.build import staging
from blackwell_stack.kernel.inputs import nar, sourcedir, sources

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

NIX_HASH = ["nix", "--extra-experimental-features", "nix-command", "hash", "path"]


def directories(directory, data, cuda_archs, copied=()):
    """FetchContent name -> the directory a build reads it from: under `directory`, or its copy."""
    dirs = {name: str(Path(directory).resolve() / name) for name in sources.needed_names(data, cuda_archs)}
    dirs.update({c.name: str(c.dest) for c in copied})
    return dirs

def nix_hash(path: Path) -> str:
    if shutil.which("nix") is None:
        pytest.skip("nix is not installed (apt-get install nix-bin); .ci/run installs it")
    return subprocess.run([*NIX_HASH, str(path)], capture_output=True, text=True, check=True).stdout.strip()


def make_tree(root: Path, files: dict[str, bytes | str], *, executable=(), links: dict[str, str] | None = None,
              empty_dirs=()) -> Path:
    root.mkdir(parents=True)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
    for rel in executable:
        os.chmod(root / rel, 0o755)
    for rel, target in (links or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)
    for rel in empty_dirs:
        (root / rel).mkdir(parents=True)
    return root


# --- the NAR hash against the real `nix hash path` -----------------------------------------------

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.dictionaries(st.lists(names, min_size=1, max_size=3).map("/".join), st.binary(max_size=300), min_size=1, max_size=8),
    flags=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_nar_hash_is_nix_hash_path(tmp_path_factory, files, flags):
    root = tmp_path_factory.mktemp("nar") / "tree"
    # A path may not be both a file and a directory: keep the first of each clash.
    kept: dict[str, bytes] = {}
    for rel, data in files.items():
        parts = rel.split("/")
        if any("/".join(parts[:i]) in kept for i in range(1, len(parts))) or any(k.startswith(rel + "/") for k in kept):
            continue
        kept[rel] = data
    executable = [rel for rel, x in zip(sorted(kept), flags) if x]
    make_tree(root, kept, executable=executable, links={"link-to-nowhere": "../../x", "sub/rel": "."},
              empty_dirs=["empty/deeper"])
    assert nar.nar_hash_sri(root) == nix_hash(root)


def test_nar_hash_of_a_single_file_and_symlink(tmp_path):
    (tmp_path / "f").write_bytes(b"12345678")  # exactly 8 bytes: no padding
    os.symlink("f", tmp_path / "l")
    assert nar.nar_hash_sri(tmp_path / "f") == nix_hash(tmp_path / "f")
    assert nar.nar_hash_sri(tmp_path / "l") == nix_hash(tmp_path / "l")


# --- a pinned source served by a real HTTP server, as GitHub serves archives ----------------------


@pytest.fixture
def served(tmp_path):
    """A directory served over HTTP on loopback; yields (root, base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def archive(tree: Path, dest: Path, top: str) -> None:
    """A .tar.gz whose single top-level directory holds the tree (the layout of GitHub's archives)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(tree, arcname=top)


def pinned_sources(tmp_path: Path, deps: dict[str, dict]) -> dict:
    """sources.json with its FetchContent entries replaced by `deps`, loaded and checked like the real one."""
    data = json.loads(sources.sources_path().read_text())
    data["fetchcontent"] = deps
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(data))
    return sources.load(path)


def pin(owner: str, repo: str, rev: str, hash_: str) -> dict:
    return {"owner": owner, "repo": repo, "rev": rev, "hash": hash_, "hash_source": "computed by the test with nix hash path", "hash_checked": "computed",
            "verified": True, "reason": None, "needed_for_archs": None}


def test_fetch_checks_by_nar_hash_and_keeps_only_what_matches(tmp_path, served):
    www, base = served
    rev = "0123456789abcdef0123456789abcdef01234567"
    good = make_tree(tmp_path / "good", {"include/x.h": "int x;\n", "tools/run.sh": "#!/bin/sh\n"}, executable=["tools/run.sh"])
    other = make_tree(tmp_path / "other", {"include/x.h": "int y;\n"})
    archive(good, www / "acme" / "lib" / "archive" / f"{rev}.tar.gz", f"lib-{rev}")
    archive(other, www / "acme" / "bad" / "archive" / f"{rev}.tar.gz", f"bad-{rev}")
    data = pinned_sources(tmp_path, {
        "repo-lib": pin("acme", "lib", rev, nix_hash(good)),
        "repo-bad": pin("acme", "bad", rev, nix_hash(good)),  # the server's archive is another tree
    })
    target = tmp_path / "sources"
    states = sourcedir.fetch(target, list(sources.pins(data, ["repo-lib"], False)), github=base)
    assert [(s.entry.relpath, s.state) for s in states] == [("repo-lib", sourcedir.OK)]
    assert (target / "repo-lib" / "include" / "x.h").read_text() == "int x;\n"
    assert os.access(target / "repo-lib" / "tools" / "run.sh", os.X_OK)
    with pytest.raises(HashMismatch) as exc:
        sourcedir.fetch(target, list(sources.pins(data, ["repo-bad"], False)), github=base)
    assert "repo-bad" in exc.value.message and nix_hash(other) in exc.value.message
    assert sorted(p.name for p in target.iterdir()) == ["repo-lib"]  # nothing half-written left behind
    # Fetching again checks what is there instead of downloading it.
    (www / "acme" / "lib" / "archive" / f"{rev}.tar.gz").unlink()
    again = sourcedir.fetch(target, list(sources.pins(data, ["repo-lib"], False)), github=base)
    assert again[0].state == sourcedir.OK
    # A tree changed by hand is caught by check.
    (target / "repo-lib" / "include" / "x.h").write_text("int z;\n")
    assert sourcedir.check(target, list(sources.pins(data, ["repo-lib"], False)))[0].state == sourcedir.MISMATCH


def test_fetchzip_pins_are_fetched_from_file_urls(tmp_path):
    tree = make_tree(tmp_path / "json", {"include/nlohmann/json.hpp": "// json\n", "CMakeLists.txt": "project(json)\n"})
    tarball = tmp_path / "dl" / "json.tar.xz"
    tarball.parent.mkdir()
    with tarfile.open(tarball, "w:xz") as tf:
        tf.add(tree, arcname="json")
    entry = {"fetcher": "fetchzip", "url": tarball.as_uri(), "hash": nix_hash(tree), "hash_source": "test", "hash_checked": "computed",
             "verified": True, "reason": None}
    data = pinned_sources(tmp_path, {"json": entry})
    states = sourcedir.fetch(tmp_path / "src", sourcedir.entries(data, []))
    assert states[0].state == sourcedir.OK and (tmp_path / "src" / "json" / "include" / "nlohmann" / "json.hpp").is_file()


def test_unreachable_source_is_a_network_error_and_leaves_nothing(tmp_path):
    data = pinned_sources(tmp_path, {"repo-lib": pin("acme", "lib", "v1.0", "sha256-" + "A" * 43 + "=")})
    with pytest.raises(NetworkError):
        sourcedir.fetch(tmp_path / "src", sourcedir.entries(data, []), github="http://127.0.0.1:9")
    assert list((tmp_path / "src").iterdir()) == []


def test_cli_check_reports_each_source(tmp_path):
    data = sources.load()
    real = json.loads(sources.sources_path().read_text())
    # A directory holding one real pinned tree is impossible without the network; an empty one is all missing.
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "kernel", "sources", "check", "--dir", str(tmp_path), "--json"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert {s["pin"] for s in report["sources"]} == {f"fetchcontent.{n}" for n in sources.needed_names(data, ["12.0a"])}
    assert {s["state"] for s in report["sources"]} == {"missing"}
    assert "repo-flashmla" in real["fetchcontent"] and not any("flashmla" in s["pin"] for s in report["sources"])


def test_cli_check_gives_the_hash_mismatch_code_for_a_tree_that_is_not_its_pin(tmp_path):
    """5, as `kernel build` gives for the same tree (the exit code table in --help), not 1 as for a missing one."""
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "README.md").write_text("not nlohmann/json\n")
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "kernel", "sources", "check", "--dir",
                             str(tmp_path), "--all", "--json"], capture_output=True, text=True, check=False)
    assert result.returncode == 5, result.stderr
    states = {s["pin"]: s["state"] for s in json.loads(result.stdout)["sources"]}
    assert states["fetchcontent.json"] == "mismatch"


# --- one function, two front ends: the FetchContent settings -------------------------------------


@pytest.mark.parametrize("archs", [["12.0a"], ["9.0a", "12.0a"], []])
def test_fetchcontent_settings_python_and_nix_agree(nix, archs):
    data = sources.load()
    dirs = {name: f"/srv/sources/{name}" for name in data["fetchcontent"]}
    expr = (
        "let k = import ./lib/kernel-sources.nix; s = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/sources.json);"
        f" dirs = builtins.fromJSON {json.dumps(json.dumps(dirs))}; archs = builtins.fromJSON {json.dumps(json.dumps(archs))};"
        " in { settings = k.fetchContentSettings s archs dirs; maps = k.prefixMaps s archs dirs; }"
    )
    got = nix.eval(expr)
    assert got["settings"] == sources.fetchcontent_settings(data, archs, dirs)
    assert got["maps"] == sources.prefix_maps(data, archs, dirs)
    assert got["settings"]["FETCHCONTENT_FULLY_DISCONNECTED"] == "ON"
    missing = copy.deepcopy(dirs)
    missing.pop("repo-fmt")
    with pytest.raises(StackError, match="no source directory for repo-fmt"):
        sources.fetchcontent_settings(data, archs, missing)
    assert "no source directory for repo-fmt" in nix.eval_error(expr.replace("dirs = builtins.fromJSON", "dirs = builtins.removeAttrs (builtins.fromJSON").replace(
        "; archs =", ") [ \"repo-fmt\" ]; archs =", 1))


def test_kernel_build_sources_hands_cmake_the_derivations_settings(nix, tmp_path):
    """`kernel build --sources DIR --dry-run --json`: exactly lib/kernel-sources.nix's settings for DIR."""
    data = sources.load()
    src = tmp_path / "sglang" / "sgl-kernel"
    (src / "python" / "sgl_kernel").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("project(sgl-kernel)\n")
    (src / "pyproject.toml").write_text('[project]\nname = "sgl-kernel"\nversion = "0.3.21"\n')
    for name in sources.needed_names(data, ["12.0a"]):
        (tmp_path / "fc" / name).mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, "-m", "blackwell_stack", "kernel", "build", "--src", str(tmp_path / "sglang"), "--sources",
         str(tmp_path / "fc"), "--dry-run", "--json", "--python", sys.executable, "--out", str(tmp_path / "dist")],
        capture_output=True, text=True, check=False,
    )
    plan = json.loads(result.stdout)
    # CMake reads each source from the stage, where the build places it (kernel/build/staging.py).
    stage = staging.layout()
    dirs = {name: str(stage.sources_dir / name) for name in sources.needed_names(data, ["12.0a"])}
    expr = (
        "let k = import ./lib/kernel-sources.nix; s = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/sources.json);"
        f" in k.fetchContentSettings s [ \"12.0a\" ] (builtins.fromJSON {json.dumps(json.dumps(dirs))})"
    )
    expected = nix.eval(expr)
    handed = {k: v for k, v in plan["defines"].items() if k.startswith("FETCHCONTENT_")}
    assert handed == expected
    assert all(f"--config-settings=cmake.define.{k}={v}" in plan["command"] for k, v in expected.items())
    # The empty directories do not match their pins: the plan says so, and a build would stop on it.
    assert {s["state"] for s in plan["source_dirs"]} == {"mismatch"}
    assert 5 in {b["code"] for b in plan["blockers"]} and "--allow-source-mismatch" in result.stderr
    assert result.returncode != 0 and not (tmp_path / "dist").exists()


def test_fetchcontent_settings_work_offline_with_real_cmake(tmp_path):
    """The settings make a real FetchContent use the local directory, with nothing reachable."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    make_tree(tmp_path / "dep", {"CMakeLists.txt": "message(STATUS \"dep from local dir\")\n"})
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\ninclude(FetchContent)\n"
        "FetchContent_Declare(repo-dep GIT_REPOSITORY https://invalid.example/dep.git GIT_TAG v1)\n"
        "FetchContent_MakeAvailable(repo-dep)\n"
        "FetchContent_Declare(repo-other GIT_REPOSITORY https://invalid.example/other.git GIT_TAG v1)\n"
        "FetchContent_MakeAvailable(repo-other)\n"
    )
    data = pinned_sources(tmp_path, {"repo-dep": pin("acme", "dep", "v1.0", "sha256-" + "A" * 43 + "=")})
    settings_ = sources.fetchcontent_settings(data, ["12.0a"], {"repo-dep": str(tmp_path / "dep")})
    flags = [f"-D{k}={v}" for k, v in settings_.items()]
    offline = subprocess.run([cmake, "-S", str(tmp_path / "proj"), "-B", str(tmp_path / "b"), *flags],
                             capture_output=True, text=True, timeout=300)
    # repo-dep comes from its directory, and nothing is downloaded: not even repo-other, which has none.
    assert offline.returncode == 0, offline.stderr
    assert "dep from local dir" in offline.stdout and "git clone" not in offline.stdout + offline.stderr
    # Without FULLY_DISCONNECTED, CMake goes to the network for what has no directory.
    online = subprocess.run([cmake, "-S", str(tmp_path / "proj"), "-B", str(tmp_path / "b2"),
                             *[f for f in flags if "FULLY_DISCONNECTED" not in f]], capture_output=True, text=True, timeout=600)
    assert "git clone" in online.stdout + online.stderr


# --- sources with git submodules (FlashMLA and its CUTLASS) --------------------------------------


def test_writable_is_the_same_rule_as_the_derivations(nix):
    """Which dependencies a build copies (CMake edits them, or submodules go inside): both front ends alike."""
    data = sources.load()
    got = nix.eval(
        "let k = import ./lib/kernel-sources.nix; s = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/sources.json);"
        " in builtins.listToAttrs (map (n: { name = n; value = (k.dependency s n).writable; }) (builtins.attrNames s.fetchcontent))"
    )
    assert got == {name: sources.writable(entry) for name, entry in data["fetchcontent"].items()}
    assert got["repo-flashmla"] and not got["repo-cutlass"]


def with_submodule(tmp_path: Path, parent_hash: str, sub_hash: str) -> dict:
    parent = pin("acme", "mla", "0123456789abcdef0123456789abcdef01234567", parent_hash)
    parent.update(needed_for_archs=["9.0a"], writable=True, submodules={
        "csrc/cutlass": {"owner": "acme", "repo": "cutlass", "rev": "v3.9.0", "hash": sub_hash,
                         "hash_source": "computed by the test with nix hash path", "hash_checked": "computed", "verified": True, "reason": None}})
    return pinned_sources(tmp_path, {"repo-mla": parent, "repo-fmt": pin("acme", "fmt", "v1.0", parent_hash)})


def test_a_source_with_a_submodule_is_fetched_checked_and_copied_whole(tmp_path, served):
    www, base = served
    rev = "0123456789abcdef0123456789abcdef01234567"
    # GitHub's archive of the parent has the submodule's directory empty; the submodule is its own archive.
    parent = make_tree(tmp_path / "mla", {"csrc/kernel.cu": "// mla\n", ".gitmodules": "[submodule]\n"}, empty_dirs=["csrc/cutlass"])
    sub = make_tree(tmp_path / "cutlass", {"include/cutlass/arch/config.h": "// SM101 and SM101a\n"})
    archive(parent, www / "acme" / "mla" / "archive" / f"{rev}.tar.gz", f"mla-{rev}")
    archive(sub, www / "acme" / "cutlass" / "archive" / "v3.9.0.tar.gz", "cutlass-3.9.0")
    data = with_submodule(tmp_path, nix_hash(parent), nix_hash(sub))
    target = tmp_path / "sources"
    states = sourcedir.fetch(target, list(sources.pins(data, ["repo-mla"], False)), github=base)
    assert [(s.entry.relpath, s.state) for s in states] == [("repo-mla", "ok"), ("repo-mla.submodules/csrc/cutlass", "ok")]
    assert list((target / "repo-mla" / "csrc" / "cutlass").iterdir()) == []
    # The build reads a writable copy with the submodule inside; what it edits there leaves DIR as checked.
    for path in target.rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    (copy,) = sourcedir.copies(target, data, ["9.0a"], tmp_path / "build" / "fetchcontent")
    sourcedir.make_copy(copy)
    config = copy.dest / "csrc" / "cutlass" / "include" / "cutlass" / "arch" / "config.h"
    assert config.read_text() == "// SM101 and SM101a\n"
    config.write_text("// SM103 and SM103a\n")
    (copy.dest / "csrc" / "kernel.cu").write_text("// edited\n")
    assert directories(target, data, ["9.0a"], [copy])["repo-mla"] == str(copy.dest)
    assert {s.state for s in sourcedir.check(target, list(sources.pins(data, ["repo-mla"], False)))} == {"ok"}
    # A second build gets a fresh copy, not the edited one.
    sourcedir.make_copy(copy)
    assert config.read_text() == "// SM101 and SM101a\n" and not copy.dest.with_name("repo-mla.partial").exists()
    for path in target.rglob("*"):
        path.chmod(0o755)


def test_submodule_paths_must_stay_inside_their_source(tmp_path):
    data = json.loads(sources.sources_path().read_text())
    data["fetchcontent"]["repo-flashmla"]["submodules"] = {"../escape": data["fetchcontent"]["repo-flashmla"]["submodules"]["csrc/cutlass"]}
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(data))
    with pytest.raises(Exception) as exc:
        sources.load(path)
    assert "../escape" in str(exc.value.message) and "relative path" in exc.value.message


def test_kernel_build_for_hopper_reads_flashmla_from_its_copy(tmp_path):
    """`kernel build --arch 9.0a --sources DIR`: FlashMLA and its CUTLASS are planned, not refused; CMake gets the copy."""
    data = sources.load()
    checkout = minimal_checkout(tmp_path)
    for entry in sourcedir.entries(data, ["9.0a"]):
        (tmp_path / "fc" / entry.relpath).mkdir(parents=True)
    allow = [arg for e in sourcedir.entries(data, ["9.0a"]) for arg in ("--allow-source-mismatch", e.relpath)]
    result = subprocess.run(
        [sys.executable, "-m", "blackwell_stack", "kernel", "build", "--src", str(checkout), "--sources", str(tmp_path / "fc"),
         "--arch", "9.0a", "--build-dir", str(tmp_path / "b"), "--dry-run", "--json", "--python", sys.executable,
         "--out", str(tmp_path / "dist"), *allow],
        capture_output=True, text=True, check=False,
    )
    plan = json.loads(result.stdout)
    copy_dir = str(staging.layout().sources_dir / "repo-flashmla")
    assert plan["defines"]["FETCHCONTENT_SOURCE_DIR_REPO-FLASHMLA"] == copy_dir
    assert plan["source_copies"] == [{"name": "repo-flashmla", "from": str((tmp_path / "fc" / "repo-flashmla").resolve()),
                                      "to": copy_dir, "submodules": {"csrc/cutlass": str(
                                          (tmp_path / "fc" / "repo-flashmla.submodules" / "csrc" / "cutlass").resolve())}}]
    assert "repo-flashmla.submodules/csrc/cutlass" in {s["path"].split("/fc/", 1)[1] for s in plan["source_dirs"]}
    assert not [b for b in plan["blockers"] if "submodule" in b["message"] or b["code"] == 5]
    assert f"-ffile-prefix-map={copy_dir}=repo-flashmla" in plan["environment"]["CXXFLAGS"]
    assert not (tmp_path / "b").exists() and not Path(copy_dir).exists()  # a dry run copies nothing


def test_real_cmake_edits_the_copy_and_not_the_sources(tmp_path):
    """As flashmla.cmake does with CUDA 13: CMake rewrites a header of the dependency and its submodule, offline."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    parent = make_tree(tmp_path / "mla", {"csrc/utils.h": "#define IS_SM100 1\n"}, empty_dirs=["csrc/cutlass"])
    sub = make_tree(tmp_path / "cutlass", {"include/cutlass/arch/config.h": "// SM101 and SM101a\n"})
    data = with_submodule(tmp_path, nix_hash(parent), nix_hash(sub))
    fc = tmp_path / "fc"
    shutil.copytree(parent, fc / "repo-mla", symlinks=True)
    shutil.copytree(sub, fc / "repo-mla.submodules" / "csrc" / "cutlass", symlinks=True)
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\ninclude(FetchContent)\n"
        "FetchContent_Declare(repo-mla GIT_REPOSITORY https://invalid.example/mla.git GIT_TAG v1)\n"
        "FetchContent_MakeAvailable(repo-mla)\n"
        "set(CONFIG \"${repo-mla_SOURCE_DIR}/csrc/cutlass/include/cutlass/arch/config.h\")\n"
        "file(READ \"${CONFIG}\" TEXT)\nstring(REPLACE \"// SM101\" \"// SM103\" TEXT \"${TEXT}\")\nfile(WRITE \"${CONFIG}\" \"${TEXT}\")\n"
        "message(STATUS \"patched ${CONFIG}\")\n"
    )
    copied = sourcedir.copies(fc, data, ["9.0a"], tmp_path / "b" / "fetchcontent")
    for c in copied:
        sourcedir.make_copy(c)
    dirs = directories(fc, data, ["9.0a"], copied)
    flags = [f"-D{k}={v}" for k, v in sources.fetchcontent_settings(data, ["9.0a"], dirs).items()]
    result = subprocess.run([cmake, "-S", str(tmp_path / "proj"), "-B", str(tmp_path / "b" / "cmake"), *flags],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (copied[0].dest / "csrc/cutlass/include/cutlass/arch/config.h").read_text() == "// SM103 and SM101a\n"
    assert {s.state for s in sourcedir.check(fc, list(sources.pins(data, ["repo-mla"], False)))} == {"ok"}
