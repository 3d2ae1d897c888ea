# The stand-in nixpkgs (./default.nix) as a flake, for `nix eval
# --override-input nixpkgs` (tests/support/flake_eval.py): what this flake and its
# inputs read of a nixpkgs flake, `lib` and `legacyPackages`. lib/ is
# nixpkgs.lib's, copied beside this file by the test.
{
  outputs =
    { self }:
    {
      lib = import ./lib;
      legacyPackages.x86_64-linux = import ./. { system = "x86_64-linux"; };
    };
}
