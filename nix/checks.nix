# `nix flake check`: what can be asserted without a GPU. Each check evaluates
# its assertion against the real pinned nixpkgs and writes what it checked;
# GPU checks stay out of here (they need requiredSystemFeatures = [ "cuda" ]).
{
  lib,
  pkgs,
  runCommand,
  python312,
  python312Packages,
  cudaPackages,
  cmake,
  blackwell-stack,
}:
let
  stackLib = import ../lib;
  config = stackLib.nixpkgsConfig;

  torchPinsFile = ../pkgs/torch-nightly/pins.json;
  torchPins = lib.importJSON torchPinsFile;
  torchUnverified = stackLib.pins.unverified torchPins;

  # An assertion that becomes a tiny derivation recording what it checked.
  assertion =
    name: ok: message:
    assert lib.assertMsg ok "blackwell-stack check ${name}: ${message}";
    runCommand "check-${name}" { } ''
      echo ${lib.escapeShellArg message} > $out
    '';

  # Whether evaluating torch's version succeeds: it must throw while a pin is
  # unverified (lib/pins.nix) and be the pinned version once all are verified.
  torchVersion = builtins.tryEval python312Packages.torch.version;
in
{
  cuda-13 =
    assertion "cuda-13" (cudaPackages.cudaMajorMinorVersion == "13.0")
      "the overlay's default cudaPackages is CUDA ${cudaPackages.cudaMajorMinorVersion}, expected 13.0";

  nixpkgs-config =
    assertion "nixpkgs-config"
      (
        pkgs.config.cudaSupport
        && pkgs.config.cudaCapabilities == [ "12.0a" ]
        && !pkgs.config.cudaForwardCompat
        && config.allowUnfreePredicate cudaPackages.cuda_nvcc
        && config.allowUnfreePredicate cudaPackages.cudnn
        && !(config.allowUnfreePredicate pkgs.unrar)
      )
      "nixpkgs is configured for CUDA on 12.0a without forward compat; the unfree predicate takes cuda_nvcc and cudnn and refuses unrar";

  cmake-version =
    assertion "cmake-version" (lib.versionAtLeast cmake.version "3.31")
      "cmake ${cmake.version} is at least 3.31 (sgl-kernel sets CMP0177)";

  torch-pins-wired =
    assertion "torch-pins-wired"
      (
        if torchUnverified == [ ] then
          torchVersion.success && torchVersion.value == torchPins.packages.torch.version
        else
          !torchVersion.success
      )
      (
        "python312Packages.torch follows pkgs/torch-nightly/pins.json ("
        + (
          if torchUnverified == [ ] then
            "torch ${torchPins.packages.torch.version}"
          else
            "evaluation stops on ${toString (map (u: "${u.package}/${u.key}") torchUnverified)}, as it must"
        )
        + ")"
      );

  # The CLI builds and imports (pythonImportsCheck), and its tests that need
  # neither network, nor a GPU, nor nix (the sandbox has none) pass.
  cli = blackwell-stack;
  cli-tests =
    runCommand "check-cli-tests"
      {
        nativeBuildInputs = [
          (python312.withPackages (ps: [
            ps.pytest
            ps.hypothesis
            ps.matplotlib
            ps.packaging
          ]))
        ];
        src = lib.cleanSource ../.;
      }
      ''
        cp -r $src source && chmod -R u+w source && cd source
        export HOME=$TMPDIR PYTHONPATH=$PWD/src
        python -m pytest -q -p no:cacheprovider -m "not network and not nix and not cuda and not slow" tests
        touch $out
      '';
}
