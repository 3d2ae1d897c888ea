# overlays.cuda-13-0: CUDA 13.0 as the package set's default CUDA
# (`cudaPackages = cudaPackages_13_0`), for hosts that want the packages
# they build with CUDA on the release of the stacks' torch (a CUDA 13.0
# build). nixpkgs' CUDA guide (doc/languages-frameworks/cuda.section.md,
# "Using cudaPackages") recommends changing the default CUDA package set
# globally, not per package, for a consistent set. Opt in: nothing of this
# flake applies it, the NixOS module included; the stacks name
# cudaPackages_13_0 and need no default. It sets the version only:
# nixpkgs.config's cudaSupport and cudaCapabilities stay the host's
# (lib.nixpkgsConfig holds the stacks' choice).
#
#   nixpkgs.overlays = [ blackwell-stack.overlays.cuda-13-0 ];
final: prev: {
  cudaPackages =
    if final ? cudaPackages_13_0 then
      final.cudaPackages_13_0
    else
      throw "blackwell-stack overlays.cuda-13-0: this nixpkgs has no cudaPackages_13_0; leave the overlay out, or use a nixpkgs that has CUDA 13.0";
}
