# The whole package set on CUDA 13.0: every package that takes `cudaPackages`
# gets cudaPackages_13_0 (nixpkgs' default set is still CUDA 12 at the pinned
# revision). nixpkgs' CUDA guide (doc/languages-frameworks/cuda.section.md)
# recommends switching the default set globally over per-package overrides,
# which leak a second CUDA into the closure.
#
# An overlay cannot set nixpkgs' config: import nixpkgs with
# `config = blackwell-stack.lib.nixpkgsConfig` (../nix/nixpkgs-config.nix) too.
final: prev: {
  cudaPackages = final.cudaPackages_13_0;
}
