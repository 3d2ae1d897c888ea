# The flake's packages, from the stacks' sets (./stack-sets.nix) and the
# nixpkgs package set they were made from: the flake's packages.<system>
# over its own pinned nixpkgs, overlays.host-nixpkgs over the package set it
# is applied to (overlays/).
#
#   sglang-env, sglang-env-<stack>  the environment of each locked stack
#                                   (lib/stacks.nix envName)
#   sgl-kernel                      built from source against the default
#                                   stack's torch; its wheel is the `dist` output
#   sgl-kernel-wheel, default       that wheel
#   cuda-home                       the CUDA 13.0 tree the environments use
#   blackwell-stack                 the CLI
{ pkgs, sets }:
let
  inherit (pkgs) lib;
  stacks = import ../lib/stacks.nix;
  kernel = sets.${stacks.default}.sgl-kernel;
in
# listToAttrs, not genAttrs' (nixpkgs.lib of 2025-09): overlays.host-nixpkgs
# evaluates this with the host's nixpkgs lib, which may be older.
lib.listToAttrs (
  map (name: lib.nameValuePair (stacks.envName name) sets.${name}.blackwellStackEnv) stacks.lockedNames
)
// {
  sgl-kernel = kernel;
  sgl-kernel-wheel = kernel.dist;
  default = kernel.dist;

  cuda-home = sets.${stacks.default}.blackwellStackEnv.passthru.blackwellStack.cudaHome;

  blackwell-stack = pkgs.callPackage ../pkgs/blackwell-stack { };
}
