# What this flake's overlays add to a nixpkgs package set, by the names the
# flake's packages have: the CLI (`blackwell-stack`), `sgl-kernel` (its wheel
# is its `dist` output) and the environment of each locked stack
# (`sglang-env` for the default stack, `sglang-env-<stack>` for the others:
# lib/stacks.nix envName). Nothing else of the package set changes.
#
# The names: nixpkgs has no pkgs/by-name package called blackwell-stack,
# sgl-kernel or sglang-env* (pkgs/by-name/bl, pkgs/by-name/sg), and packages
# the kernel as python3Packages.sglang-kernel, inside its Python set. The
# flake's cuda-home and sgl-kernel-wheel stay out (the first is a generic
# name): they are sglang-env.passthru.blackwellStack.cudaHome and
# sgl-kernel.dist.
#
# Builtins only, and the names never depend on the package set: nixpkgs
# computes an overlay's attribute names before any value ("NAMESET
# STRICTNESS", pkgs/top-level/cuda-packages.nix), so only the values come
# from `packages`, when used.
packages:
let
  stacks = import ../lib/stacks.nix;
  names = [
    "blackwell-stack"
    "sgl-kernel"
  ]
  ++ map stacks.envName stacks.lockedNames;
in
builtins.listToAttrs (
  map (name: {
    inherit name;
    value = packages.${name};
  }) names
)
