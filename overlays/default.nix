# Every blackwell-stack overlay, in order: CUDA 13.0 for the whole set, the
# pinned torch nightly and its triton, then the stack's packages built on them.
# Import nixpkgs with `config = (import ../lib).nixpkgsConfig` as well: an
# overlay cannot set config (cudaSupport, cudaCapabilities, unfree predicate).
{
  poetry2nix ? null,
}:
final: prev:
prev.lib.composeManyExtensions [
  (import ./cuda13.nix)
  (import ./torch-nightly.nix)
  (import ./stack-packages.nix { inherit poetry2nix; })
] final prev
