# The torch nightly pins the overlay uses, resolved with builtins only (so
# tests evaluate exactly what overlays/torch-nightly.nix sees, with a bare nix):
#   forPython system pythonVersion -> { pinned, torch, triton }
# `pinned` says whether pins.json has a wheel key for that system and Python;
# `torch`/`triton` are lib/pins.nix `wheel` results: fetchurl arguments, or a
# throw naming the command that fills the pin, when forced.
let
  pinsLib = import ../lib/pins.nix;
  file = "pkgs/torch-nightly/pins.json";
  pins = builtins.fromJSON (builtins.readFile ../pkgs/torch-nightly/pins.json);
  wheel = pinsLib.wheel { inherit pins file; };
in
{
  inherit file pins;

  forPython = system: pythonVersion: {
    pinned = pins.packages.torch.wheels ? "${system}-${pinsLib.pythonKey pythonVersion}";
    torch = wheel "torch" system pythonVersion;
    triton = wheel "triton" system pythonVersion;
  };
}
