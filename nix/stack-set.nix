# The Python package set of one stack, from stacks/<stack>/uv.lock:
#
#   pyproject.nix's base set (python312)
#     + build-system-pkgs (wheels of build backends: scikit-build-core and
#       wheel for the sgl-kernel build)
#     + the lock (uv2nix: every package from its locked wheel)
#     + the fixups (nix/fixups/: what a wheel needs that the lock cannot say)
#
# and `blackwellStackEnv`, the environment (nix/stack-env.nix), with
# `blackwellStackDevEnv` for the dev shell. The lock
# decides what is in the set; the fixups say how, package by package, from the
# data in stacks/<stack>/wheels.json and nix/fixups/*.json.
{
  pkgs,
  pyproject-nix,
  uv2nix,
  build-system-pkgs,
  stack,
}:
let
  inherit (pkgs) lib;
  stacks = import ../lib/stacks.nix;

  # Throws with the lock command when the stack has no lock.
  workspace = uv2nix.lib.workspace.loadWorkspace { workspaceRoot = stacks.workspaceRoot stack; };

  # Prebuilt wheels only: no package of a stack is built from an sdist
  # (tests/test_stacks_data.py checks every package has a wheel for the target).
  lockOverlay = workspace.mkPyprojectOverlay { sourcePreference = "wheel"; };

  python = pkgs.python312;

  baseSet = pkgs.callPackage pyproject-nix.build.packages { inherit python; };

  fixups = import ./fixups { inherit pkgs stack; };

  envOverlay = final: _prev: {
    blackwellStackEnv = import ./stack-env.nix {
      inherit pkgs stack;
      pythonSet = final;
    };
    # The same, with what `blackwell-stack kernel build` needs in the venv
    # (scikit-build-core and wheel, from build-system-pkgs): the dev shell's.
    blackwellStackDevEnv = import ./stack-env.nix {
      inherit pkgs stack;
      pythonSet = final;
      name = "sglang-dev-env-${stack}";
      extraSpec = {
        scikit-build-core = [ ];
        wheel = [ ];
      };
    };
  };
in
assert lib.assertMsg (python.pythonVersion == (stacks.meta stack).python)
  "blackwell-stack: stacks/${stack}/stack.json says Python ${(stacks.meta stack).python}, the set is built with ${python.pythonVersion}";
baseSet.overrideScope (
  lib.composeManyExtensions [
    build-system-pkgs.overlays.wheel
    lockOverlay
    fixups
    envOverlay
  ]
)
