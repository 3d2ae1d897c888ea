# torch and triton at the dated nightly of ../pkgs/torch-nightly/pins.json:
# nixpkgs' torch-bin and triton-bin with only version and src replaced (and
# CUDA libraries from cudaPackages_13_0, not the nvidia-* wheels the nightly
# names in its METADATA), made the `torch` and `triton` of every Python set
# whose version the pins file has a wheel key for (today 3.12 on x86_64-linux).
#
# A pin that is not verified makes evaluation throw with the command that
# fills it (lib/pins.nix), as soon as torch or triton is used.
final: prev:
let
  pins = import ../nix/torch-nightly-pins.nix;
  system = final.stdenv.hostPlatform.system;

  # `name` is the wheel's file name, so the store path is the one
  # `blackwell-stack pins vendor` adds for a wheel the index no longer serves.
  fetchWheel =
    pin:
    final.fetchurl {
      inherit (pin) name url hash;
    };

  nightly =
    pyFinal: pyPrev:
    let
      pinned = pins.forPython system pyPrev.python.pythonVersion;
      torchPin = pinned.torch;
      tritonPin = pinned.triton;
    in
    {
      # triton-bin links ${cudaPackages.cuda_nvcc}/bin/ptxas into the wheel:
      # CUDA 13's ptxas knows sm_120a.
      triton-bin =
        (pyPrev.triton-bin.override { cudaPackages = final.cudaPackages_13_0; }).overridePythonAttrs
          (old: {
            inherit (tritonPin) version;
            src = fetchWheel tritonPin;
          });

      torch-bin =
        (pyPrev.torch-bin.override {
          cudaPackages = final.cudaPackages_13_0;
          triton = pyFinal.triton-bin;
        }).overridePythonAttrs
          (old: {
            inherit (torchPin) version;
            src = fetchWheel torchPin;
            meta = old.meta // {
              changelog = "https://github.com/pytorch/pytorch/commits/nightly";
            };
          });

      torch = pyFinal.torch-bin;
      triton = pyFinal.triton-bin;
    };
in
{
  pythonPackagesExtensions = prev.pythonPackagesExtensions ++ [
    (
      pyFinal: pyPrev:
      if (pins.forPython system pyPrev.python.pythonVersion).pinned then nightly pyFinal pyPrev else { }
    )
  ];
}
