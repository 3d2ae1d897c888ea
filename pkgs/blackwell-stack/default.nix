# The `blackwell-stack` CLI: a plain Python application whose one runtime
# dependency is `packaging` (pyproject.toml, PEP 621; flit-core builds it).
# The CLI reads the repository's data (stacks, pins, recipes, profiles,
# patches) at run time; the wrapper points BLACKWELL_STACK_ROOT at a copy of
# just that data (./data.nix, src/blackwell_stack/data/registry.py), and a
# user may point it at a checkout.
{
  lib,
  python312Packages,
}:
let
  root = ../..;
  inherit (lib) fileset;
  project = (lib.importTOML (root + "/pyproject.toml")).project;

  # What the wheel is built from.
  src = fileset.toSource {
    inherit root;
    fileset = fileset.unions [
      (root + "/pyproject.toml")
      (root + "/README.md")
      (root + "/src")
    ];
  };

  # What the CLI reads at run time: the data files of its registry (./data.nix).
  # paths.py recognises the root by stacks/stable/stack.json.
  dataRoot = fileset.toSource {
    inherit root;
    fileset = fileset.unions (map (file: root + "/${file}") (import ./data.nix));
  };
in
python312Packages.buildPythonApplication {
  pname = project.name;
  inherit (project) version;
  pyproject = true;
  inherit src;

  build-system = [ python312Packages.flit-core ];
  dependencies = [ python312Packages.packaging ];

  makeWrapperArgs = [
    "--set-default"
    "BLACKWELL_STACK_ROOT"
    "${dataRoot}"
  ];

  pythonImportsCheck = [ "blackwell_stack.cli" ];

  meta = {
    inherit (project) description;
    mainProgram = "blackwell-stack";
    platforms = lib.platforms.linux;
  };
}
