# The flake's nixosModules.sglang: services.sglang (./sglang.nix) with its
# packages taken from the flake itself, so the host's nixpkgs is left alone
# (no nixpkgs.config, no overlays; the environments are built with the flake's
# own nixpkgs).
#
#   packagesFor: system -> the flake's packages for that system
#
# services.sglang.stack picks the environment: the flake's `sglang-env` for
# the default stack, `sglang-env-<stack>` for another (lib/stacks.nix
# envName). Both defaults are mkDefault, so a host may still set its own.
# tests/test_serve_module_eval.py evaluates this file with stand-in packages.
{ packagesFor }:
{
  config,
  lib,
  pkgs,
  ...
}:
let
  stacks = import ../lib/stacks.nix;
  packages = packagesFor pkgs.stdenv.hostPlatform.system;
in
{
  imports = [ ./sglang.nix ];
  services.sglang.package = lib.mkDefault packages.${stacks.envName config.services.sglang.stack};
  # The smoke test runs this flake's CLI (blackwell-stack smoke).
  services.sglang.smokeTest.package = lib.mkDefault packages.blackwell-stack;
  # So does the build-time check of the configuration (modules/sglang/check.nix).
  services.sglang.checkPackage = lib.mkDefault packages.blackwell-stack;
}
