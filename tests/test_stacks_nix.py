"""The Nix side of each lock, evaluated with the real uv2nix, pyproject.nix and
nixpkgs.lib at the revisions flake.lock pins (tests/support/nix_inputs.py checks each
tree's narHash first).

What is evaluated for real: uv2nix's lock parsing, marker evaluation, wheel
selection and source choice (loadWorkspace -> mkPyprojectOverlay), and this
project's fixup overlays (nix/fixups/) over uv2nix's result.

What is not, and why: nixpkgs itself. It needs Nix >= 2.18 (its
lib/minver.nix) where the test machines have Debian's Nix 2.8, and it cannot
be fetched here. So the few nixpkgs functions the overlay calls are replaced
by recorders of their arguments: `stdenv.mkDerivation` returns its attribute
set (with overrideAttrs), `fetchurl` returns what it would fetch, hooks are
their names, and the interpreter is a record of what pyproject.nix reads from
python312 (CPython 3.12 on x86_64-linux, glibc 2.40 or 2.42 at the locked
nixpkgs: NixOS/nixpkgs#379542; the lock's newest manylinux tag is 2_34, so
either gives the same choices). Nothing is built.
"""

from __future__ import annotations

import json
import re
import shlex

import pytest
from support import REPO, nix_inputs

from blackwell_stack.data import stack as stack_data
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.stacks import libraries

pytestmark = pytest.mark.nix

LOCKED = [n for n in stack_data.names() if stack_data.load(n).locked]

# The set as uv2nix builds it, with nixpkgs' part recorded (see the module docstring).
SET = """
let
  lib = import {nixpkgs_lib}/lib;
  pyproject-nix = import {pyproject_nix} {{ inherit lib; }};
  uv2nix = import {uv2nix}/lib {{ inherit lib pyproject-nix; }};
  stacks = import {repo}/lib/stacks.nix;
  stack = "{stack}";

  workspace = uv2nix.workspace.loadWorkspace {{ workspaceRoot = stacks.workspaceRoot stack; }};
  lockOverlay = workspace.mkPyprojectOverlay {{ sourcePreference = "wheel"; }};

  platform = lib.systems.elaborate "x86_64-linux";
  recorded = name: {{ outPath = "recorded:" + name; }};
  mkDerivation = f:
    let
      attrsOf = fin: if builtins.isFunction f then f fin else f;
      self = attrsOf self;
    in
    self // {{
      outPath = "recorded:${{self.pname}}-${{self.version}}";
      overrideAttrs = g: mkDerivation (fin: let old = attrsOf fin; in old // g old);
    }};
  stdenv = {{
    inherit mkDerivation;
    isLinux = true;
    isDarwin = false;
    hostPlatform = platform;
    buildPlatform = platform;
    targetPlatform = platform;
    cc.libc = {{ pname = "glibc"; version = "2.40"; linuxHeaders.version = "6.12"; }};
  }};
  python = {{
    pname = "python3";
    version = "3.12.12";
    inherit stdenv;
    sitePackages = "lib/python3.12/site-packages";
    passthru = {{
      implementation = "cpython";
      pythonVersion = "3.12";
      sourceVersion = {{ major = "3"; minor = "12"; patch = "12"; suffix = ""; }};
    }};
  }};
  pkgs = {{
    inherit lib stdenv;
    fetchurl = args: {{ fetchurl = args; }};
    autoPatchelfHook = "autoPatchelfHook";
    unzip = "unzip";
    pythonManylinuxPackages = {{ manylinux1 = [ "manylinux1" ]; manylinux2010 = [ "manylinux2010" ]; manylinux2014 = [ "manylinux2014" ]; }};
    pyprojectHook = "pyprojectHook";
    pyprojectWheelHook = "pyprojectWheelHook";
    pyprojectEditableHook = "pyprojectEditableHook";
    resolveBuildSystem = spec: builtins.attrNames spec;
    addDriverRunpath.driverLink = "/run/opengl-driver";
    zlib = recorded "zlib";
    python312 = recorded "python312";
  }};
  base = pkgs // {{ inherit python; }};
  overlay = lib.composeManyExtensions ([ lockOverlay ] ++ {fixups});
  set = lib.fix (self:
    let
      scope = pkgs // self;
      callPackage = f: args: f (builtins.intersectAttrs (builtins.functionArgs f) scope // args);
      prev = base // {{ inherit callPackage; }};
    in
    prev // overlay (self // {{ inherit callPackage; }}) prev);
  packages = builtins.attrNames (lockOverlay set base);
in
"""

FIXUPS = """[
    (import {repo}/nix/fixups/wheel-choice.nix {{ inherit lib pkgs stacks stack; audit = lib.importJSON {repo}/stacks/{stack}/wheels.json; }})
    (import {repo}/nix/fixups/kept-wheels.nix {{ inherit lib pkgs stacks stack; audit = lib.importJSON {repo}/stacks/{stack}/wheels.json; }})
    (import {repo}/nix/fixups/wheel-libraries.nix {{ inherit lib pkgs stack; audit = lib.importJSON {repo}/stacks/{stack}/wheels.json; }})
  ]"""


def set_expr(stack: str, body: str, *, fixups: bool) -> str:
    paths = {name.replace("-", "_"): nix_inputs.source(name) for name in nix_inputs.BUNDLES}
    head = SET.format(repo=REPO, stack=stack, fixups=FIXUPS.format(repo=REPO, stack=stack) if fixups else "[ ]",
                      **paths)
    return head + body


@pytest.fixture(scope="module")
def uv2nix_sources():
    return {name: nix_inputs.source(name) for name in nix_inputs.BUNDLES}


@pytest.mark.parametrize("stack", LOCKED)
def test_uv2nix_resolves_each_package_to_a_locked_wheel(nix, uv2nix_sources, stack):
    """Which file uv2nix itself fetches for each package on x86_64-linux / CPython 3.12."""
    got = nix.eval(set_expr(stack, """
      lib.genAttrs packages (name:
        let drv = set.${name}; in
        if drv.passthru.format or null == null then { local = true; }
        else { inherit (drv.passthru) format; inherit (drv) version; src = drv.src.fetchurl or null; })
    """, fixups=False))
    lock = stack_data.load(stack).lock()
    locked = {p.name: p for p in lock.packages.values() if not p.source.get("virtual")}
    assert set(got) - {"blackwell-stack-" + stack} == set(locked)
    for name, pkg in locked.items():
        entry = got[name]
        assert entry["format"] == "wheel", name
        assert entry["version"] == pkg.version, name
        chosen = wheels.uv2nix_choice(pkg)
        # uv2nix's own choice is what blackwell_stack.data.wheel_choice models.
        assert entry["src"]["name"] == wheels.filename(chosen), name
        assert (entry["src"]["url"], entry["src"]["hash"]) == (chosen["url"], chosen["hash"]), name


@pytest.mark.parametrize("stack", LOCKED)
def test_with_the_fixups_nix_installs_the_same_files_as_uv(nix, uv2nix_sources, stack):
    """After nix/fixups/wheel-choice.nix every package's file is uv's choice on the target."""
    got = nix.eval(set_expr(stack, "lib.genAttrs packages (name: set.${name}.src.fetchurl.name or null)",
                            fixups=True))
    lock = stack_data.load(stack).lock()
    for pkg in lock.packages.values():
        if pkg.source.get("virtual"):
            continue
        assert got[pkg.name] == wheels.filename(wheels.uv_choice(pkg)), pkg.name
    audit = libraries.load_audit(stack_data.load(stack))
    assert audit["choices"], "the stable lock has packages whose files the two installers would pick differently"
    for name, file in audit["choices"].items():
        assert wheels.filename(wheels.uv2nix_choice(lock.get(name))) != file


def _library_fixups(nix, stack: str) -> dict:
    """What nix/fixups/wheel-libraries.nix gives autoPatchelf for every wheel the audit lists."""
    return nix.eval(set_expr(stack, """
      lib.mapAttrs (name: _: {
        appendRunpaths = set.${name}.appendRunpaths or [ ];
        autoPatchelfIgnoreMissingDeps = set.${name}.autoPatchelfIgnoreMissingDeps or [ ];
        preFixup = set.${name}.preFixup or "";
      }) (lib.importJSON """ + f"{REPO}/stacks/{stack}/wheels.json" + """).libraries
    """, fixups=True))


@pytest.mark.parametrize("stack", LOCKED)
def test_wheel_library_fixups_cover_exactly_the_audit(nix, uv2nix_sources, stack):
    """For every wheel with ELF files: each library it links from another locked wheel is an
    autoPatchelf search path (that wheel's site-packages), libcuda comes from the driver,
    nixpkgs' libraries from nixpkgs, and exactly the libraries the audit finds missing and
    nix/fixups/wheel-libraries.json explains are ignored; the $ORIGIN entries come back."""
    got = _library_fixups(nix, stack)
    lock = stack_data.load(stack).lock()
    audit = libraries.load_audit(stack_data.load(stack))
    decisions = json.loads((REPO / "nix" / "fixups" / "wheel-libraries.json").read_text())
    assert set(got) == set(audit["libraries"])
    for package, info in audit["libraries"].items():
        fixed = got[package]
        needs = info["needs"]
        providers = {p for need in needs.values() if isinstance(need, dict) for p in need["from"]}
        search = set(re.findall(r"addAutoPatchelfSearchPath (\S+)", fixed["preFixup"]))
        missing = [lib for lib, where in needs.items() if where == "missing"]
        mapped = {decisions["from_nixpkgs"][lib]["attribute"] for lib in missing if lib in decisions["from_nixpkgs"]}
        assert search == ({f"recorded:{p}-{lock.get(p).version}/lib/python3.12/site-packages" for p in providers}
                          | {f"recorded:{attribute}/lib" for attribute in mapped}), package
        driver = [lib for lib, where in needs.items() if where == "driver"]
        ignored = [lib for lib in decisions["left_missing"].get(package, {}).get("libraries", []) if lib in missing]
        assert fixed["autoPatchelfIgnoreMissingDeps"] == driver + ignored, package
        assert set(missing) == set(ignored) | {lib for lib in missing if lib in decisions["from_nixpkgs"]}, package
        # The driver's directory on every wheel with an ELF: NVIDIA's libraries dlopen it without DT_NEEDing it.
        assert fixed["appendRunpaths"] == info["origin_runpaths"] + ["/run/opengl-driver/lib"], package


def driver_gaps(audit: dict, fixups: dict) -> list[str]:
    """The loader check: glibc searches the RUNPATH of the object that calls dlopen, not its dependents'. Every wheel
    whose ELF files DT_NEED a driver library, or name one in their bytes (libcudart, libcublasLt, NCCL and more
    dlopen libcuda.so.1 or libnvidia-ml.so.1 without DT_NEEDing it), must carry the driver's directory itself."""
    return [f"{package}: {', '.join(sorted(loads))} without /run/opengl-driver/lib in its RUNPATH"
            for package, info in sorted(audit["libraries"].items())
            if (loads := set(info["driver_names"]) | {lib for lib, where in info["needs"].items() if where == "driver"})
            and "/run/opengl-driver/lib" not in fixups[package]["appendRunpaths"]]


@pytest.mark.parametrize("stack", LOCKED)
def test_every_library_that_loads_the_driver_finds_it_through_its_own_runpath(nix, uv2nix_sources, stack):
    """The loader check on the fixups Nix evaluates (benchmarks/driver-runpath/: torch found no GPU without it)."""
    got = _library_fixups(nix, stack)
    audit = libraries.load_audit(stack_data.load(stack))
    assert {"nvidia-cuda-runtime", "nvidia-cublas", "nvidia-cusparselt-cu13", "nvidia-nccl-cu13"} <= {
        p for p, info in audit["libraries"].items() if info["driver_names"]}
    assert driver_gaps(audit, got) == []


@pytest.mark.parametrize("stack", LOCKED)
def test_the_loader_check_fails_the_fixups_that_gave_the_driver_only_to_wheels_that_link_it(nix, uv2nix_sources, stack):
    """The policy before the fix, the driver's directory only where a DT_NEEDED names the driver: the check names
    the CUDA runtime, whose libcudart.so.13 is what dlopens libcuda.so.1 for torch."""
    got = _library_fixups(nix, stack)
    audit = libraries.load_audit(stack_data.load(stack))
    before = {package: {"appendRunpaths": [entry for entry in fixed["appendRunpaths"]
                                           if entry != "/run/opengl-driver/lib"
                                           or "driver" in audit["libraries"][package]["needs"].values()]}
              for package, fixed in got.items()}
    gaps = driver_gaps(audit, before)
    assert any(gap.startswith("nvidia-cuda-runtime: libcuda.so.1 ") for gap in gaps), gaps
    assert not any(gap.startswith("torch:") for gap in gaps)


@pytest.mark.parametrize("stack", LOCKED)
def test_python_loads_of_the_driver_by_name_get_the_driver_links_path(nix, uv2nix_sources, stack):
    """pynvml, cuda-pathfinder (cuda-bindings' loader), torch.cuda, ... dlopen a driver library by name from the
    interpreter, which has no RUNPATH: for each load the stack's wheels have (the audit's driver_by_name), the fixup
    writes the driver link's path into the source, after torch's RUNPATH fixups, not instead of them."""
    decisions = json.loads((REPO / "nix" / "fixups" / "wheel-libraries.json").read_text())["driver_by_name"]
    named = libraries.load_audit(stack_data.load(stack))["driver_by_name"]
    expected = {package: [load for load in entry["loads"] if load["library"] in named.get(package, {}).get(load["file"], [])]
                for package, entry in decisions.items()}
    expected = {package: loads for package, loads in expected.items() if loads}
    got = nix.eval(set_expr(stack, "lib.genAttrs " + json.dumps(sorted(expected)).replace(",", " ")
                            + ' (name: { postInstall = set.${name}.postInstall or ""; '
                            + "appendRunpaths = set.${name}.appendRunpaths or [ ]; })", fixups=True))
    assert {"cuda-pathfinder", "nvidia-ml-py", "torch"} <= set(expected)
    for package, loads in expected.items():
        words = shlex.split(got[package]["postInstall"].replace("\\\n", " "))
        assert words == [word for load in loads for word in (
            "substituteInPlace", f"$out/lib/python3.12/site-packages/{load['file']}", "--replace-fail",
            load["replace"], load["replace"].replace(load["library"], "/run/opengl-driver/lib/" + load["library"]))], package
    assert "/run/opengl-driver/lib" in got["torch"]["appendRunpaths"]


@pytest.mark.network
@pytest.mark.parametrize("stack", LOCKED)
def test_each_replaced_string_is_every_load_of_the_driver_in_the_locked_file(stack):
    """The string each fix replaces is in the locked wheel's file (a new version that changed it stops the build
    with --replace-fail), and it covers every occurrence of the library's name there: none is left to load by name."""
    from blackwell_stack.formats import remote_zip

    decisions = json.loads((REPO / "nix" / "fixups" / "wheel-libraries.json").read_text())["driver_by_name"]
    stack_ = stack_data.load(stack)
    chosen = stack_.chosen_wheels(stack_.lock())
    named = libraries.load_audit(stack_)["driver_by_name"]
    for package, entry in decisions.items():
        loads = [load for load in entry["loads"] if load["library"] in named.get(package, {}).get(load["file"], [])]
        if not loads:
            continue
        with remote_zip.RemoteWheel(libraries.remote_file(chosen[package][1])) as wheel:
            for load in loads:
                text = wheel.fetch_member(load["file"]).read_text()
                assert text.count(load["replace"]) >= 1, (package, load)
                fixed = text.replace(load["replace"], load["replace"].replace(load["library"], "/driver/" + load["library"]))
                assert fixed.count(load["library"]) == fixed.count("/driver/" + load["library"]), (package, load)


@pytest.mark.parametrize("stack", LOCKED)
def test_wheel_library_fixups_of_the_wheels_that_matter(nix, uv2nix_sources, stack):
    """torch, triton and the kernel: what the deployment depends on, spelled out."""
    got = _library_fixups(nix, stack)
    audit = libraries.load_audit(stack_data.load(stack))
    torch = got["torch"]
    # libcuda.so.1 from the driver, never bundled: appended to RUNPATH, not needed at build time.
    assert "/run/opengl-driver/lib" in torch["appendRunpaths"]
    assert torch["autoPatchelfIgnoreMissingDeps"] == ["libcuda.so.1"]
    # Every other library torch links comes from a locked nvidia wheel: nvshmem included.
    providers = sorted({p for need in audit["libraries"]["torch"]["needs"].values() if isinstance(need, dict)
                        for p in need["from"]})
    assert "nvidia-nvshmem-cu13" in providers and "nvidia-cublas" in providers
    # $ORIGIN-relative RUNPATH entries come back after autoPatchelf.
    assert "$ORIGIN" in torch["appendRunpaths"]
    # libz from nixpkgs' zlib; cusolver finds cublas, cusparse and nvJitLink in their own wheels.
    assert "addAutoPatchelfSearchPath recorded:zlib/lib" in got["triton"]["preFixup"]
    for provider in ("nvidia-cublas", "nvidia-cusparse", "nvidia-nvjitlink"):
        assert f"recorded:{provider}-" in got["nvidia-cusolver"]["preFixup"]
    if stack == "stable":
        # libpython from the stack's own interpreter; torchao's CUDA 12 runtime left missing.
        assert "addAutoPatchelfSearchPath recorded:python312/lib" in got["torchcodec"]["preFixup"]
        assert got["torchao"]["autoPatchelfIgnoreMissingDeps"] == ["libcudart.so.12"]
        assert got["nvidia-cutlass-dsl"]["autoPatchelfIgnoreMissingDeps"] == ["libcuda.so.1"]
    if stack == "current":
        # The prebuilt kernel: libcuda from the driver, the CUDA 13 runtime and torch from their wheels.
        kernel = got["sglang-kernel"]
        assert kernel["autoPatchelfIgnoreMissingDeps"] == ["libcuda.so.1"]
        assert "/run/opengl-driver/lib" in kernel["appendRunpaths"]
        for provider in ("torch", "nvidia-cuda-runtime"):
            assert f"recorded:{provider}-" in kernel["preFixup"], provider
        # torch-memory-saver's CUDA 12 builds are never loaded with a CUDA 13 torch.
        assert got["torch-memory-saver"]["autoPatchelfIgnoreMissingDeps"] == ["libcuda.so.1", "libcudart.so.12"]


def test_an_unexplained_missing_library_stops_evaluation(nix, uv2nix_sources, tmp_path):
    """A library no wheel ships and nix/fixups/wheel-libraries.json does not name is an error, naming both."""
    audit = libraries.load_audit(stack_data.load("stable"))
    audit["libraries"]["triton"]["needs"]["libexample.so.7"] = "missing"
    edited = tmp_path / "wheels.json"
    edited.write_text(json.dumps(audit))
    expr = set_expr("stable", "set.triton.preFixup", fixups=True).replace(
        f"lib.importJSON {REPO}/stacks/stable/wheels.json", f"lib.importJSON {edited}")
    err = nix.eval_error(expr)
    assert "triton links libexample.so.7" in err and "nix/fixups/wheel-libraries.json" in err
