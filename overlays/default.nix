# overlays.default: this flake's packages in a nixpkgs package set, the very
# derivations of the flake's packages.<system>: built from the flake's own
# pinned inputs (nixpkgs with lib.nixpkgsConfig, uv2nix, the locks), the
# bit-for-bit configuration. Of the package set it is applied to it reads
# stdenv.hostPlatform.system alone, to pick the flake's packages for that
# system, and it adds the attributes of ./attributes.nix; every other
# attribute stays as it was. overlays.host-nixpkgs builds the same from the
# host's nixpkgs instead (./host-nixpkgs.nix).
#
#   nixpkgs.overlays = [ blackwell-stack.overlays.default ];
#
#   packagesFor: system -> the flake's packages for that system
#
# `final: prev:` by name: `nix flake check` refuses an overlay whose
# arguments are named otherwise.
{ packagesFor }:
final: prev:
import ./attributes.nix (packagesFor final.stdenv.hostPlatform.system)
