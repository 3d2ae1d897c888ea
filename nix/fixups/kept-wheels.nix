# Wheels a lock takes from the stack's local wheels/ directory (the nightly's
# torch, triton and torchvision, which PyTorch's nightly index no longer
# serves): uv2nix would read them from the flake's source tree, where an
# uncommitted directory is not. Each becomes a fixed-output fetch named by its
# file and hashed by the lock (stacks/<stack>/wheels.json `kept_wheels`); the
# URL is where PyTorch served it (stack.json `kept_wheels.url_template`), a
# hint only: `blackwell-stack pins vendor FILE` puts a kept copy into the Nix
# store at exactly this path.
{
  lib,
  pkgs,
  stacks,
  stack,
  audit,
}:
_final: prev:
let
  template =
    (stacks.meta stack).kept_wheels.url_template
      or (throw "blackwell-stack: stacks/${stack}/uv.lock takes wheels from a local directory, but stack.json has no kept_wheels.url_template");
  escape = builtins.replaceStrings [ "+" ] [ "%2B" ];
in
lib.mapAttrs (
  package: kept:
  prev.${package}.overrideAttrs (_old: {
    src = pkgs.fetchurl {
      name = kept.file;
      url = builtins.replaceStrings [ "{filename}" ] [ (escape kept.file) ] template;
      inherit (kept) hash;
    };
  })
) audit.kept_wheels
