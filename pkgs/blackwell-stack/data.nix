# The data the CLI reads at run time (the wrapper points BLACKWELL_STACK_ROOT
# at a copy of it), as paths relative to the repository: the files that
# src/blackwell_stack/data/registry.py lists as read by the CLI. Builtins
# only, so that tests/test_data_registry.py evaluates it with a bare
# nix-instantiate and holds it equal to the registry, file for file.
let
  root = ../..;
  inherit (builtins) attrNames concatMap filter match readDir;

  # The regular files of dir whose name matches pattern.
  filesIn =
    dir: pattern:
    let
      entries = readDir (root + "/${dir}");
    in
    map (name: "${dir}/${name}") (
      filter (name: entries.${name} == "regular" && match pattern name != null) (attrNames entries)
    );
  stacks =
    let
      entries = readDir (root + "/stacks");
    in
    filter (name: entries.${name} == "directory") (attrNames entries);
in
# each stack's stack.json, lock, pyproject, wheels.json and pins (not its kept wheels/)
concatMap (
  stack: filesIn "stacks/${stack}" "stack[.]json|uv[.]lock|pyproject[.]toml|wheels[.]json|pins[.]json"
) stacks
++ filesIn "modules/profiles" ".*[.]json"
++ [ "modules/rules.json" ]
++ filesIn "modules/sglang-flags" ".*[.]json"
# recipe.json, sources.json, reference-wheel.json, kernel-tests.json
++ filesIn "pkgs/sgl-kernel" ".*[.]json"
# gpu_check.py, which `kernel test` runs on SM100/SM120 hosts
++ filesIn "pkgs/sgl-kernel" ".*[.]py"
++ filesIn "patches/sgl-kernel" ".*[.]patch"
++ [
  "flake.lock"
  "nix/flake-inputs.json"
]
