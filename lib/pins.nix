# Pin lookup over the JSON pins files, the one lookup of a wheel pin for
# fetchurl (builtins only, so tests evaluate it with a bare `nix-instantiate`).
let
  # "3.12" -> "312", the key suffix nixpkgs' binary-hashes.nix uses too.
  pythonKey = pythonVersion:
    builtins.concatStringsSep "" (builtins.filter builtins.isString (builtins.split "\\." pythonVersion));

  unverifiedMessage = { file, package, key, entry, updateCommand }:
    "blackwell-stack: the pin of ${package} for ${key} in ${file} is not verified"
    + (if entry ? reason && entry.reason != null then " (${entry.reason})" else "")
    + ". Fill it in with: ${updateCommand}";
in
rec {
  inherit pythonKey;

  # The wheel pin of `package` for `system` and `pythonVersion` ("3.12") (or
  # its pure-Python "any" wheel), as
  # { pname, version, name, url, hash } ready for fetchurl; throws with the
  # command that fills the pin when it is missing or unverified.
  wheel = { pins, file ? "pins.json" }: package: system: pythonVersion:
    let
      wanted = "${system}-${pythonKey pythonVersion}";
      pkg = pins.packages.${package} or (throw "blackwell-stack: ${file} has no package ${package}");
      # A pure-Python wheel is pinned once, under "any", for every system.
      key = if pkg.wheels ? ${wanted} then wanted else "any";
      entry = pkg.wheels.${key} or (throw
        "blackwell-stack: ${file} pins no ${package} wheel for ${wanted} (pinned: ${builtins.concatStringsSep ", " (builtins.attrNames pkg.wheels)}). Add it with: ${pins.update_command}");
      usable = entry.verified or false && entry.hash or null != null && entry.url or null != null;
    in
    if !usable then
      throw (unverifiedMessage { inherit file package key entry; updateCommand = pins.update_command; })
    else {
      pname = package;
      inherit (pkg) version;
      # fetchurl needs a store-safe name: the file name, never the %2B-escaped URL tail.
      name = entry.filename;
      inherit (entry) url hash;
    };

  # Every (package, key) pair of a pins file that is not verified, for checks and plan.
  unverified = pins:
    builtins.concatLists (map
      (package:
        map (key: { inherit package key; })
          (builtins.filter (key: !(pins.packages.${package}.wheels.${key}.verified or false))
            (builtins.attrNames pins.packages.${package}.wheels)))
      (builtins.attrNames pins.packages));
}
