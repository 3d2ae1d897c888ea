# The `blackwell-stack` CLI, built by poetry2nix from pyproject.toml's
# [tool.poetry] tables and poetry.lock (poetry2nix reads no PEP 621 [project]).
# The CLI reads the repository's data (pins, recipes, profiles, patches) at run
# time; the wrapper points BLACKWELL_STACK_ROOT at a copy of just that data
# (see src/blackwell_stack/paths.py), and a user may point it at a checkout.
{
  lib,
  pkgs,
  python312,
  poetry2nix,
}:
let
  root = ../..;
  inherit (lib) fileset;

  # What the wheel is built from.
  src = fileset.toSource {
    inherit root;
    fileset = fileset.unions [
      (root + "/pyproject.toml")
      (root + "/poetry.lock")
      (root + "/README.md")
      (root + "/src")
    ];
  };

  # What the CLI reads at run time: the JSON data beside the Nix code, the Nix
  # files it reports on, the patches it lists. paths.py recognises the root by
  # flake.nix and pkgs/.
  dataRoot = fileset.toSource {
    inherit root;
    fileset = fileset.difference (fileset.fileFilter (
      file:
      lib.any file.hasExt [
        "json"
        "nix"
        "lock"
        "patch"
        "toml"
        "md"
      ]
    ) root) (fileset.unions (map fileset.maybeMissing [
      (root + "/src")
      (root + "/tests")
      (root + "/.dev")
      (root + "/.ci")
    ]));
  };

  poetry2nixLib = import poetry2nix { inherit pkgs; };
in
poetry2nixLib.mkPoetryApplication {
  projectDir = root;
  inherit src;
  pyproject = root + "/pyproject.toml";
  poetrylock = root + "/poetry.lock";
  python = python312;
  # The CLI needs only `packaging` at run time; the optional extras (plot, test)
  # belong to the dev shell.
  extras = [ ];
  # Wheels from the lock: poetry2nix is unmaintained (last commit 2025-04-03),
  # and its sdist build overrides lag behind nixpkgs.
  preferWheels = true;

  makeWrapperArgs = [
    "--set-default"
    "BLACKWELL_STACK_ROOT"
    "${dataRoot}"
  ];

  pythonImportsCheck = [ "blackwell_stack.cli" ];

  meta = {
    description = "Pins, builds, checks and verifies SGLang serving Qwen3.5-397B-A17B-NVFP4 on SM120 with CUDA 13";
    mainProgram = "blackwell-stack";
    platforms = lib.platforms.linux;
  };
}
