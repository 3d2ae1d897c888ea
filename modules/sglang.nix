# services.sglang: SGLang serving a profile of modules/profiles/ on one of the
# locked serving stacks (services.sglang.stack; by default the stable stack's
# Qwen3.5-397B-A17B-NVFP4 on 8x RTX PRO 6000 Blackwell, SM120, PCIe).
#
# The argv is rendered by lib/sglang-service.nix (`render`), which the tests
# compare with `blackwell-stack serve render`; the rules of modules/rules.json
# are checked when the system is built (sglang/check.nix runs `blackwell-stack
# serve check --module-config`), and choices are enums taken from the profile's
# SGLang flag table (modules/sglang-flags/<version>.json).
#
# The module leaves the host's nixpkgs alone: it sets no nixpkgs.* and takes
# its packages from options (the flake's nixosModules.sglang sets them to the
# flake's own packages). Of pkgs it reads only addDriverRunpath.driverLink and
# runCommand (the check).
# docs/nixos-module.md explains each run-time setting with its upstream source.
{ lib, ... }:
{
  imports = [
    ./sglang/options.nix
    ./sglang/assertions.nix
    ./sglang/unit.nix
    ./sglang/check.nix
    # services.sglang.gpuChecks: the host builds the flake's GPU checks.
    ./sglang/gpu-checks.nix
    # services.sglang.smokeTest: its ExecStartPost comes after the readiness gate.
    ./sglang-smoke.nix
    (lib.mkRenamedOptionModule
      [ "services" "sglang" "startTimeoutSec" ]
      [ "services" "sglang" "readiness" "timeoutSec" ]
    )
  ];
}
