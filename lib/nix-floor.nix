# The oldest Nix the flake's nixpkgs evaluates with, as one clear refusal.
#
# nixpkgs lists what it needs of Nix in lib/minfeatures.nix (since 2025-08;
# before, lib/minver.nix): `missing` is the features the running Nix lacks.
# The flake passes its nixpkgs' list (the locked nixpkgs: Nix 2.18) and wraps
# its outputs in `guard`: on an older Nix every output built from nixpkgs
# stops with the same message, before anything else of nixpkgs is read. The
# builtins-only outputs (`lib`) stay usable: the project's own tests evaluate
# them with Debian's Nix 2.8. Builtins only (tests/test_nix_floor.py).
#
#   (import ./nix-floor.nix { inherit missing; nixVersion = builtins.nixVersion; }).guard
#     { except = [ "lib" ]; } outputs
{
  # [ { description; condition; } ] that the running Nix does not meet
  missing,
  # the running Nix's version, for the message
  nixVersion,
}:
let
  # minfeatures.nix says the floor in words: "`builtins.nixVersion` reports at least 2.18".
  floors = builtins.concatMap (
    feature:
    let
      found = builtins.match ".*at least ([0-9][0-9.]*).*" feature.description;
    in
    if found == null then [ ] else found
  ) missing;
  wanted = if floors == [ ] then "a newer Nix" else "Nix ${builtins.head floors} or newer";
  message =
    "blackwell-stack: this flake's nixpkgs needs ${wanted}; this is Nix ${nixVersion}. "
    + "Missing (nixpkgs' lib/minfeatures.nix): ${builtins.concatStringsSep "; " (map (f: f.description) missing)}. "
    + "Install ${wanted} (Debian 12's nix-bin 2.8 is enough only for this project's own tests; "
    + "README.md, With Nix) and run the command again.";
in
{
  inherit wanted message;
  ok = missing == [ ];
  guard =
    {
      except ? [ ],
    }:
    # `except` first: those outputs must not even read nixpkgs' list (a flake input is fetched when read).
    builtins.mapAttrs (name: value: if builtins.elem name except || missing == [ ] then value else throw message);
}
