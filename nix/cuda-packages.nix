# cudaPackages_13_0 as the stacks use it, for the kernel build, CUDA_HOME and
# the dev shell alike: nixpkgs' set, with cuda_crt's math headers declaring
# rsqrt and rsqrtf noexcept (patches/cuda_crt-13.0).
#
# glibc 2.42 declares both (C23) with __THROW; CUDA 13.0's crt/math_functions.h
# declares them without, and every nvcc compile that finds that header through
# a non-system include path (-I, as torch's cpp_extension and DeepGEMM's JIT
# pass $CUDA_HOME/include) stops at "exception specification is incompatible".
# The flake's nixpkgs (2026-03-03) has glibc 2.42 (NixOS/nixpkgs#479279) and
# does not patch cuda_crt: #484031 patched CUDA 12's header in cuda_nvcc,
# #488738 dropped that for CUDA 13, and #512796 (2026-04-23) patches cuda_crt
# in its postInstall. A host nixpkgs that has #512796 keeps its own.
{ pkgs }:
let
  inherit (pkgs) lib;
  patchedByNixpkgs = crt: lib.hasInfix "rsqrt" (crt.postInstall or "");
in
pkgs.cudaPackages_13_0.overrideScope (
  _final: prev: {
    cuda_crt =
      if patchedByNixpkgs prev.cuda_crt then
        prev.cuda_crt
      else
        prev.cuda_crt.overrideAttrs (old: {
          patches = (old.patches or [ ]) ++ import ../lib/patch-series.nix ../patches/cuda_crt-13.0;
        });
  }
)
