# The nixpkgs config the stack needs, built from ./nixpkgs-config.json with
# builtins only: the flake imports nixpkgs with it, exports it as
# `lib.nixpkgsConfig`, and tests evaluate the unfree predicate with a bare nix.
let
  data = builtins.fromJSON (builtins.readFile ./nixpkgs-config.json);

  licenseNames = map (license: license.shortName) data.unfree.licenses;
  packageNames = map (package: package.name) data.unfree.packages;

  toList = x: if builtins.isList x then x else [ x ];

  # lib.getName without lib: pname, else the name part of `name`.
  packageName = package: package.pname or (builtins.parseDrvName (package.name or "")).name;

  # nixpkgs' check-meta counts a license without `free` as free.
  isAllowedLicense = license: (license.free or true) || builtins.elem (license.shortName or null) licenseNames;
in
{
  inherit (data) cudaSupport cudaCapabilities cudaForwardCompat;

  # Unfree is allowed only for NVIDIA's CUDA licenses (every unfree license of
  # the package must be one of them) and for the few NVIDIA-bound packages
  # named in the JSON; anything else unfree still fails evaluation.
  allowUnfreePredicate =
    package:
    builtins.elem (packageName package) packageNames
    || builtins.all isAllowedLicense (toList (package.meta.license or [ ]));
}
