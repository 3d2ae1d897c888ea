# The fixups of a stack's Python set: what its wheels need in Nix that a
# uv.lock cannot say. Each is a pyproject.nix overlay driven by data:
#
#   wheel-choice.nix     the same file as uv where uv2nix alone would pick another
#   kept-wheels.nix      wheels a lock takes from the stack's local wheels/ directory
#   wheel-libraries.nix  autoPatchelf: libraries from other wheels, nixpkgs and the driver
#   sgl-kernel.nix       sgl-kernel built from source against the set's torch
#
# The data is stacks/<stack>/wheels.json (read from the locked wheels by
# `blackwell-stack stack audit`) and nix/fixups/*.json (the decisions, each
# with its reason). Runtime settings (triton's C compiler and libcuda path,
# flashinfer's CUDA_HOME) belong to the environment: nix/stack-env.nix.
{ pkgs, stack }:
let
  inherit (pkgs) lib;
  stacks = import ../../lib/stacks.nix;
  auditFile = ../../stacks + "/${stack}/wheels.json";
  lockFile = ../../stacks + "/${stack}/uv.lock";
  audit =
    if !builtins.pathExists auditFile then
      throw "blackwell-stack: stacks/${stack}/wheels.json is missing. Write it with: blackwell-stack stack audit ${stack} --write"
    else
      let
        data = lib.importJSON auditFile;
      in
      if data.lock_sha256 != builtins.hashFile "sha256" lockFile then
        throw "blackwell-stack: stacks/${stack}/wheels.json was made from another uv.lock. Write it again with: blackwell-stack stack audit ${stack} --write"
      else
        data;
  args = {
    inherit
      lib
      pkgs
      stacks
      stack
      audit
      ;
  };
in
lib.composeManyExtensions [
  (import ./wheel-choice.nix args)
  (import ./kept-wheels.nix args)
  (import ./wheel-libraries.nix args)
  (import ./sgl-kernel.nix args)
]
