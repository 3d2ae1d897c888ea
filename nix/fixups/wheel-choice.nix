# One lock, the same files: where a release ships several wheels for the same
# Python tag and different platform tags (manylinux2014 and manylinux_2_34
# builds of cryptography, say), uv2nix takes the first in the lock's order and
# uv the newest the host's glibc allows. For the packages stacks/<stack>/wheels.json
# lists under `choices` (computed from the lock by blackwell_stack.data.wheel_choice),
# the set takes uv's file, so a Nix environment and `uv sync --frozen` install
# the same bytes. soundfile is why it matters: its first file is the pure
# `any` wheel without the libsndfile the manylinux wheel carries.
{
  lib,
  pkgs,
  stacks,
  stack,
  audit,
}:
_final: prev:
lib.mapAttrs (
  package: file:
  let
    wheel = stacks.lockedWheel stack package file;
  in
  prev.${package}.overrideAttrs (old: {
    # Named by its file: the wheel hooks match on it, and `pins vendor` adds
    # a kept copy at this store path.
    src = pkgs.fetchurl {
      name = file;
      inherit (wheel) url hash;
    };
    # uv2nix gives manylinux wheels the manylinux libraries (glibc,
    # libstdc++, ...) and a pure wheel none: a pure first choice replaced by a
    # manylinux file needs them.
    buildInputs =
      (old.buildInputs or [ ])
      ++ lib.optionals ((old.buildInputs or [ ]) == [ ] && lib.hasInfix "manylinux" file) pkgs.pythonManylinuxPackages.manylinux2014;
  })
) audit.choices
