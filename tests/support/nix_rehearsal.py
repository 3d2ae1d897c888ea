"""The Nix code's own input lists, evaluated with the real nix for the rehearsal (docs/nix-rehearsal.md).

nix/cuda-home.nix and pkgs/sgl-kernel/default.nix are imported as they are,
with the locked nixpkgs lib (tests/support/nix_inputs.py) and a `pkgs` in which the
nixpkgs parts are stand-ins: every cudaPackages_13_0 member is a package
whose outputs are directories laid out from NVIDIA's wheels
(support/rehearsal/layout.py), with nixpkgs' `outputs`, `outputName`
and `outputSpecified` so that lib.getOutput / getDev / chooseDevOutputs pick
outputs as in nixpkgs, overrideAttrs on each and lib.makeScope's overrideScope
on the set (nix/cuda-packages.nix; the patches it adds are read back by
`cuda_patches` and applied by the layout); symlinkJoin and mkDerivation return their arguments;
fetchFromGitHub and fetchzip return the offline sources; tools and Python
packages are the rehearsal's directories. A component the Nix code names
and the rehearsal data lacks fails the evaluation, naming it.

Evaluated with --read-write-mode: the derivation's builtins.toFile files and
the project files it interpolates (jobs.py) land in the Nix store, as in a
real evaluation, so the rehearsed build phase can read them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPO, nix_inputs
from support.rehearsal.layout import CudaTree
from support.rehearsal.stdenv import Input

PRELUDE = """
let
  lib = import {nixpkgs_lib}/lib;
  data = builtins.fromJSON (builtins.readFile {data});
  # A package's derivation attributes (c.attrs: what the nixpkgs file of the date sets, e.g. postInstall)
  # are on it, and overrideAttrs changes them; the outputs stay the same directories (the layout applies
  # the patches the Nix code adds: cuda_patches below).
  package = name: c:
    lib.genAttrs c.outputs (o: {{ outPath = c.dirs.${{o}}; outputName = o; outputSpecified = true; }})
    // {{ pname = name; inherit (c) version outputs; outPath = c.dirs.out; outputName = "out"; }}
    // (c.attrs or {{ }})
    // {{ overrideAttrs = f: package name (c // {{ attrs = (c.attrs or {{ }}) // f (c.attrs or {{ }}); }}); }};
  # lib.makeScope's overrideScope: the extension sees the final set and the one before it.
  mkScope = base: base // {{ overrideScope = g: mkScope (lib.fix (self: base // g self base)); }};
  cudaPackages_13_0 = mkScope (lib.mapAttrs package data.cuda // {{
    cudaMajorMinorVersion = "13.0";
    backendStdenv.mkDerivation = f: let attrs = f attrs // {{ finalPackage = attrs; }}; in attrs;
  }});
  notBuilt = name: {{ outPath = "/rehearsal/not-built/" + name; }};
in
"""


def _nix_instantiate() -> str:
    binary = shutil.which("nix-instantiate")
    if binary is None:
        pytest.skip("nix-instantiate is not installed (apt-get install nix-bin); .ci/run installs it")
    return binary


def evaluate(body: str, data: dict, workdir: Path) -> dict:
    """body evaluated after the prelude (lib, data, cudaPackages_13_0, notBuilt), as JSON."""
    data_file = workdir / "rehearsal-standins.json"
    data_file.write_text(json.dumps(data))
    expr = PRELUDE.format(nixpkgs_lib=nix_inputs.source("nixpkgs-lib"), data=data_file) + body
    result = subprocess.run([_nix_instantiate(), "--read-write-mode", "--eval", "--strict", "--json", "--expr", expr],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise NixError(result.stderr)
    return json.loads(result.stdout)


class NixError(Exception):
    pass


def cuda_data(tree: CudaTree, attrs: dict[str, dict] | None = None) -> dict:
    """Every component of the rehearsal data as the stand-in's input: its outputs' directories (not laid out yet),
    and for some the derivation attributes a nixpkgs file sets (`attrs`)."""
    return {name: {"version": c.version, "outputs": list(c.outputs),
                   "dirs": {o: str(tree.output_dir(name, o)) for o in c.outputs},
                   **({"attrs": attrs[name]} if attrs and name in attrs else {})}
            for name, c in tree.components.items()}


CUDA_PATCHES = """
let
  cuda = import ./nix/cuda-packages.nix { pkgs = { inherit lib cudaPackages_13_0; }; };
in
lib.mapAttrs (_: p: map toString p.patches) (lib.filterAttrs (name: p: data.cuda ? ${name} && p ? patches) cuda)
"""


def cuda_patches(tree: CudaTree, workdir: Path, attrs: dict[str, dict] | None = None) -> dict[str, list[Path]]:
    """{component: [patch]}: what nix/cuda-packages.nix patches in cudaPackages_13_0, whose files (at the lock:
    no patches, no postInstall of their own unless `attrs` says so) are the rehearsal's components."""
    found = evaluate(CUDA_PATCHES, {"cuda": cuda_data(tree, attrs)}, workdir)
    return {name: [Path(p) for p in patches] for name, patches in found.items()}


def as_inputs(paths: list[str], tree: CudaTree) -> list[Input]:
    """Evaluated paths back to inputs: a CUDA component's output (laid out now), or a plain directory."""
    known = {str(tree.output_dir(name, o)): (name, o) for name, c in tree.components.items() for o in c.outputs}
    found = []
    for path in paths:
        if path in known:
            name, output = known[path]
            tree.outputs(name)
            found.append(Input(Path(path), name, output))
        else:
            found.append(Input(Path(path)))
    return found


CUDA_HOME = """
import ./nix/cuda-home.nix {
  pkgs = { inherit lib cudaPackages_13_0; symlinkJoin = args: args; };
}
"""


def cuda_home(tree: CudaTree, workdir: Path) -> dict:
    """nix/cuda-home.nix's symlinkJoin arguments: {name, paths, postBuild, passthru}."""
    return evaluate(CUDA_HOME, {"cuda": cuda_data(tree)}, workdir)


SGL_KERNEL = """
let
  fromSources = name: { outPath = data.sources + "/fc/" + lib.removeSuffix "-source" name; };
  # What callPackage gives the derivation from the stack's set and nixpkgs, and the
  # arguments nix/fixups/sgl-kernel.nix passes by name.
  scope = {
    inherit lib;
    version = "0.3.21";
    autoAddDriverRunpath = notBuilt "autoAddDriverRunpath";
    fetchFromGitHub = args: if args ? name then fromSources args.name else { outPath = data.sources + "/sglang"; };
    fetchzip = args: fromSources args.name;
    runCommand = name: _: _: notBuilt name;
    pyprojectHook = notBuilt "pyprojectHook";
    resolveBuildSystem = spec: map (name: { outPath = data.python.${name}; pname = name; }) (builtins.attrNames spec);
    mkVirtualEnv = name: _: notBuilt name;
    python = { sitePackages = "lib/python${data.pythonVersion}/site-packages"; };
    torch = { outPath = data.python.torch; };
    cmake = { outPath = data.cmake; version = data.cmakeVersion; };
    ninja = { outPath = data.ninja; };
    numactl = { outPath = data.numactl; };
    cudaPackages = import ./nix/cuda-packages.nix { pkgs = { inherit lib cudaPackages_13_0; }; };
  };
  f = import ./pkgs/sgl-kernel/default.nix;
  drv = f (builtins.intersectAttrs (builtins.functionArgs f) scope);
in
{
  inherit (drv) uvBuildFlags preBuild sourceRoot env;
  src = "${drv.src}";
  patches = map toString drv.patches;
  patchFlags = drv.patchFlags or [ "-p1" ];
  buildInputs = map lib.getDev drv.buildInputs;
  nativeBuildInputs = map lib.getDev drv.nativeBuildInputs;
  flags = { inherit (drv) dontUseCmakeConfigure dontUseNinjaBuild; };
}
"""


def sgl_kernel(tree: CudaTree, workdir: Path, *, sources: Path, python: dict[str, Path], python_version: str,
               cmake: Path, cmake_version: str, ninja: Path, numactl: Path) -> dict:
    """pkgs/sgl-kernel/default.nix's attributes the build reads, with the stand-ins' paths."""
    data = {"cuda": cuda_data(tree), "sources": str(sources), "python": {k: str(v) for k, v in python.items()},
            "pythonVersion": python_version,
            "cmake": str(cmake), "cmakeVersion": cmake_version, "ninja": str(ninja), "numactl": str(numactl)}
    return evaluate(SGL_KERNEL, data, workdir)


DEV_SHELL = """
let
  pkgs = {
    inherit lib;
    cudaPackages_13_0 = mkScope (cudaPackages_13_0 // { backendStdenv.cc = { outPath = data.cc; }; });
    symlinkJoin = args: args // { outPath = data.cudaHome; };
    addDriverRunpath.driverLink = "/run/opengl-driver";
    cmake = { outPath = data.cmake; version = data.cmakeVersion; };
    ninja = { outPath = data.ninja; };
    mkShell = args: args;
    writeShellScriptBin = name: text: { outPath = data.cli; inherit name text; };
  };
  # The stack's set as far as nix/stack-env.nix reads it: mkVirtualEnv's derivation, overridable.
  pythonSet = {
    python.sitePackages = "lib/python3.12/site-packages";
    mkVirtualEnv = name: spec:
      let base = { inherit name; passthru = { }; outPath = data.env; spec = builtins.attrNames spec; }; in
      base // { overrideAttrs = f: base // f base; };
  };
  devEnv = import ./nix/stack-env.nix {
    inherit pkgs pythonSet;
    stack = "stable";
    name = "sglang-dev-env-stable";
    extraSpec = { scikit-build-core = [ ]; wheel = [ ]; };
  };
  shell = import ./nix/dev-shell.nix { inherit pkgs; pythonSet = { blackwellStackDevEnv = devEnv; }; };
in
{
  inherit (shell) shellHook;
  packages = map toString shell.packages;
  environment = devEnv.passthru.blackwellStack.environment;
  cli = (builtins.elemAt shell.packages 1).text;
}
"""


def stack_environment(directory: Path, python: Path, pythonpath: str) -> Path:
    """A stand-in for a stack's environment (what its bin/python is): the rehearsal's Python with `pythonpath`."""
    (directory / "bin").mkdir(parents=True)
    launcher = directory / "bin" / "python"
    launcher.write_text(f'#!/bin/bash\nexport PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{pythonpath}"\nexec {python} "$@"\n')
    launcher.chmod(0o755)
    return directory


def dev_shell(tree: CudaTree, workdir: Path, *, cuda_home: Path, env: Path, cli: Path, cc: Path, cmake: Path,
              cmake_version: str, ninja: Path) -> dict:
    """nix/dev-shell.nix over the stable stack's nix/stack-env.nix: {shellHook, packages, environment, cli}."""
    data = {"cuda": cuda_data(tree), "cudaHome": str(cuda_home), "env": str(env), "cli": str(cli), "cc": str(cc),
            "cmake": str(cmake), "cmakeVersion": cmake_version, "ninja": str(ninja)}
    return evaluate(DEV_SHELL, data, workdir)


WHEEL_FIXUPS = """
let
  audit = lib.importJSON data.audit;
  # pyproject.nix's packages as far as the fixups read them: overrideAttrs gives the attributes the fixups set,
  # one override on top of another (torch gets its RUNPATHs, then its sources).
  package = attrs: attrs // { overrideAttrs = f: package (attrs // f attrs); };
  fixed = builtins.attrNames audit.libraries ++ builtins.attrNames audit.driver_by_name;
  prev = lib.genAttrs fixed (_: package { })
    // { python.sitePackages = "lib/python${data.python}/site-packages"; };
  final = lib.genAttrs (builtins.attrNames audit.libraries)
    (name: { outPath = data.placed.${name} or ("/rehearsal/not-placed/" + name); });
  fixups = import ./nix/fixups/wheel-libraries.nix {
    inherit lib audit;
    inherit (data) stack;
    pkgs = {
      addDriverRunpath.driverLink = data.driverLink;
      zlib.outPath = data.zlib;
      python312.outPath = "/rehearsal/not-placed/python312";
    };
  } final prev;
in
lib.mapAttrs (_: d: {
  preFixup = d.preFixup or "";
  appendRunpaths = d.appendRunpaths or [ ];
  ignore = d.autoPatchelfIgnoreMissingDeps or [ ];
  postInstall = d.postInstall or "";
}) (lib.filterAttrs (name: _: builtins.elem name fixed) fixups)
"""


def wheel_fixups(stack: str, placed: dict[str, Path], python: str, *, driver_link: Path, zlib: Path,
                 workdir: Path) -> dict[str, dict]:
    """nix/fixups/wheel-libraries.nix evaluated for the stack's audit: {package: {preFixup, appendRunpaths, ignore,
    postInstall}},
    with the placed packages' prefixes as the store paths and driver_link as addDriverRunpath.driverLink."""
    data = {"audit": str(REPO / "stacks" / stack / "wheels.json"), "stack": stack, "python": python,
            "placed": {name: str(prefix) for name, prefix in placed.items()}, "driverLink": str(driver_link),
            "zlib": str(zlib)}
    return evaluate(WHEEL_FIXUPS, data, workdir)


GPU_CHECKS = """
let
  pkgs = {
    inherit lib;
    runCommand = name: attrs: buildCommand: attrs // { inherit name buildCommand; outPath = "/rehearsal/not-built/" + name; };
    python312 = {
      sitePackages = "lib/python3.12/site-packages";
      pkgs = lib.genAttrs [ "pytest" "pluggy" "iniconfig" ] (name: { outPath = data.pythonPackages.${name}; });
    };
  };
  env = {
    name = "sglang-env-stable";
    outPath = data.env;
    passthru.blackwellStack = { environment = data.environment; path = [ { outPath = data.env; } ]; };
  };
  checks = import ./nix/gpu-checks.nix {
    inherit pkgs;
    packages.blackwell-stack = { outPath = data.cli; };
    sets.stable = { blackwellStackEnv = env; sgl-kernel.src = { outPath = data.sources; }; };
  };
in
lib.mapAttrs (_: c: {
  inherit (c) buildCommand env requiredSystemFeatures;
  nativeBuildInputs = map toString c.nativeBuildInputs;
}) checks
"""


def gpu_checks(workdir: Path, *, env: Path, cli: Path, sources: Path, python_packages: dict[str, Path],
               environment: dict[str, str]) -> dict:
    """nix/gpu-checks.nix with the rehearsal's environment, CLI and sources: {name: {buildCommand, env,
    requiredSystemFeatures, nativeBuildInputs}}."""
    data = {"env": str(env), "cli": str(cli), "sources": str(sources), "environment": environment,
            "pythonPackages": {k: str(v) for k, v in python_packages.items()}}
    return evaluate(GPU_CHECKS, data, workdir)
