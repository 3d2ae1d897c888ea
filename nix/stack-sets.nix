# Every stack's Python package set (./stack-set.nix), from one nixpkgs package
# set: the flake's own pinned nixpkgs for packages.<system>, or the package
# set overlays.host-nixpkgs is applied to. A stack without a lock throws,
# when used, with the command that makes it.
{
  pkgs,
  pyproject-nix,
  uv2nix,
  build-system-pkgs,
}:
let
  stacks = import ../lib/stacks.nix;
in
pkgs.lib.genAttrs stacks.names (
  stack:
  import ./stack-set.nix {
    inherit
      pkgs
      pyproject-nix
      uv2nix
      build-system-pkgs
      stack
      ;
  }
)
