# overlays.host-nixpkgs: the packages of overlays.default, built from the
# package set this overlay is applied to instead of the flake's pinned
# nixpkgs: the host's stdenv, python312, cudaPackages_13_0, CMake, ninja and
# the CLI's Python packages, under the host's nixpkgs config (which must
# enable CUDA and allow the CUDA toolchain's unfree licenses: lib.nixpkgsConfig). The
# stacks' Python packages are still their locked wheels (uv2nix); only what
# comes from nixpkgs is the host's. This is not the pinned configuration:
# the store paths differ from the flake's packages, and the host's nixpkgs
# decides whether they build (docs/flake.md, "Overlays").
#
#   nixpkgs.overlays = [ blackwell-stack.overlays.host-nixpkgs ];
{
  pyproject-nix,
  uv2nix,
  build-system-pkgs,
}:
final: prev:
let
  # What the stacks take from nixpkgs by name (nix/stack-set.nix, nix/cuda-home.nix,
  # nix/fixups/sgl-kernel.nix): a nixpkgs without them stops here, saying so.
  missing = builtins.filter (name: !(final ? ${name})) [
    "python312"
    "cudaPackages_13_0"
  ];
  packages = import ../nix/packages.nix {
    pkgs = final;
    sets = import ../nix/stack-sets.nix {
      pkgs = final;
      inherit pyproject-nix uv2nix build-system-pkgs;
    };
  };
  # nixpkgs marks every CUDA redistributable broken unless config.cudaSupport
  # (buildRedist's brokenAssertions), which would stop the first build with a
  # message about cuda_nvcc, not about the config.
  cudaSupport = final.config.cudaSupport or false;
in
import ./attributes.nix (
  if missing != [ ] then
    throw "blackwell-stack overlays.host-nixpkgs: this nixpkgs has no ${builtins.concatStringsSep " or " missing}; the stacks need CPython 3.12 and CUDA 13.0 (their torch is a CUDA 13.0 build). Use overlays.default, which builds with the flake's own pinned nixpkgs."
  else if !cudaSupport then
    throw "blackwell-stack overlays.host-nixpkgs: this nixpkgs' config does not enable CUDA, so nixpkgs marks its CUDA packages (cudaPackages_13_0, which the kernel build and CUDA_HOME use) broken. Set nixpkgs.config.cudaSupport = true (and allowUnfreePredicate = blackwell-stack.lib.nixpkgsConfig.allowUnfreePredicate), or use overlays.default, which builds with the flake's own pinned nixpkgs and config."
  else
    packages
)
