# The serving stacks (stacks/<name>/stack.json, uv.lock) with builtins only, so
# tests evaluate it with a bare nix-instantiate and compare it with
# blackwell_stack.data.stack on the same files:
#
#   stacks = import ./lib/stacks.nix;
#   stacks.names                   # [ "stable" "current" "nightly" ]: the default first
#   stacks.default                 # "stable"
#   stacks.meta "stable"           # stack.json
#   stacks.isLocked "nightly"      # false
#   stacks.workspaceRoot "stable"  # ../stacks/stable, or a throw naming the lock command
#   stacks.versions "stable"       # { sglang = "0.5.9"; flashinfer = "0.6.5"; torch = "2.12.1"; }
#   stacks.rootDependencies "stable"  # [ "flashinfer-cubin" "flashinfer-python" "sglang" "torch" "torchvision" ]
#   stacks.lockedNames             # [ "current" "stable" ]: the stacks with a lock
#   stacks.envName "current"       # "sglang-env-current": the flake's package of its environment
#   stacks.profiles "current"      # its profiles (modules/profiles/<name>.json), the first one its default
#
# Everything that needs the lock throws, for a stack without one, with the
# message of Stack.missing_lock_message() and the command that makes it.
let
  inherit (builtins)
    attrNames
    filter
    fromJSON
    fromTOML
    head
    length
    listToAttrs
    mapAttrs
    pathExists
    readDir
    readFile
    ;

  root = ../stacks;

  onDisk = builtins.sort builtins.lessThan (
    filter (name: (readDir root).${name} == "directory" && pathExists (root + "/${name}/stack.json")) (
      attrNames (readDir root)
    )
  );

  # The one order every listing gives (blackwell_stack.data.stack.names): the default first, then by name.
  names = if length defaults == 1 then [ default ] ++ filter (name: name != default) onDisk else onDisk;

  meta =
    name:
    if builtins.elem name onDisk then
      fromJSON (readFile (root + "/${name}/stack.json"))
    else
      throw "blackwell-stack: there is no stack ${builtins.toJSON name} (stacks/${name}/stack.json); stacks: ${builtins.concatStringsSep ", " names}";

  lockFile = name: root + "/${name}/uv.lock";

  isLocked = name: pathExists (lockFile name);

  missingLockMessage =
    name:
    let
      m = meta name;
      reason = m.lock.missing_reason or null;
    in
    "blackwell-stack: the ${name} stack has no lock (stacks/${name}/uv.lock)"
    + (if reason != null then ": ${reason}" else ".")
    + " Make it with: ${m.lock.command}";

  # The directory uv2nix's loadWorkspace reads, once there is a lock to read.
  workspaceRoot = name: if isLocked name then root + "/${name}" else throw (missingLockMessage name);

  lockOf = name: if isLocked name then fromTOML (readFile (lockFile name)) else throw (missingLockMessage name);

  # The locked version of a package (by its uv.lock name), or a throw.
  lockedVersion =
    name: package:
    let
      found = filter (p: p.name == package) (lockOf name).package;
    in
    if length found == 1 then
      (head found).version
    else
      throw "blackwell-stack: stacks/${name}/uv.lock has ${toString (length found)} packages named ${package}; stack.json reads a version from it";

  versions = name: mapAttrs (_key: package: lockedVersion name package) (meta name).versions_from_lock;

  # The stack's own requirements: the dependencies of the lock's virtual root
  # (the stack's pyproject.toml), which the environment is made of.
  rootDependencies =
    name:
    let
      roots = filter (p: (p.source.virtual or null) == ".") (lockOf name).package;
    in
    if length roots == 1 then
      map (dep: dep.name) ((head roots).dependencies or [ ])
    else
      throw "blackwell-stack: stacks/${name}/uv.lock has ${toString (length roots)} virtual roots; a stack is one virtual project";

  defaults = filter (name: (meta name).default or false) onDisk;

  default =
    if length defaults == 1 then
      head defaults
    else
      throw "blackwell-stack: ${toString (length defaults)} stacks say \"default\": true; exactly one must";

  # The flake's package of a stack's environment: the default stack's is
  # `sglang-env`, every other's `sglang-env-<name>` (flake.nix, nixosModules.sglang).
  envName = name: if name == default then "sglang-env" else "sglang-env-${name}";

  profiles =
    name:
    let
      listed = (meta name).profiles or [ ];
    in
    if listed != [ ] then
      listed
    else
      throw "blackwell-stack: stacks/${name}/stack.json lists no profiles; name the modules/profiles/<name>.json it serves";

  # A wheel's file name from its URL or path in the lock (percent escapes
  # decoded as uv2nix does for its fetchurl names: `%2B` is `+`).
  wheelFile =
    wheel:
    builtins.replaceStrings [ "%2B" "%2b" "%21" "%7E" "%7e" ] [ "+" "+" "!" "~" "~" ] (
      baseNameOf (wheel.url or wheel.path)
    );

  # The lock's entry { url | path, hash, size } of one file of a package, or a throw.
  lockedWheel =
    name: package: file:
    let
      pkgs = filter (p: p.name == package) (lockOf name).package;
      found = if pkgs == [ ] then [ ] else filter (w: wheelFile w == file) ((head pkgs).wheels or [ ]);
    in
    if length found == 1 then
      head found
    else
      throw "blackwell-stack: stacks/${name}/uv.lock has no file ${file} for ${package}; stacks/${name}/wheels.json is stale. Write it again with: blackwell-stack stack audit ${name} --write";
in
{
  inherit
    names
    meta
    isLocked
    missingLockMessage
    workspaceRoot
    lockedVersion
    versions
    rootDependencies
    wheelFile
    lockedWheel
    default
    envName
    profiles
    ;

  lock = lockOf;

  lockedNames = filter isLocked names;

  # What plan and checks list: every stack, locked or not, with the command
  # that makes a missing lock.
  status = listToAttrs (
    map (name: {
      inherit name;
      value = {
        locked = isLocked name;
        command = (meta name).lock.command;
      };
    }) names
  );
}
