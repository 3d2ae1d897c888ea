# `nix develop`: the helpers' Python environment from poetry.lock (poetry2nix,
# with the plot and test extras), the pinned torch nightly, the CUDA 13 toolkit
# and the tools that build sgl-kernel (cmake >= 3.31, ninja, scikit-build-core).
# The banner runs the check that first proved the nightly on the target host.
{
  lib,
  pkgs,
  mkShell,
  python312,
  cudaPackages_13_0,
  cmake,
  ninja,
  writeShellScriptBin,
  poetry2nix,
}:
let
  poetry2nixLib = import poetry2nix { inherit pkgs; };
  root = ../.;

  pythonEnv = poetry2nixLib.mkPoetryEnv {
    projectDir = root;
    python = python312;
    groups = [ "main" ];
    extras = [ "*" ];
    preferWheels = true;
    # From the overlays: torch is the pinned nightly (torch-bin), not a lock entry.
    extraPackages = ps: [
      ps.torch
      ps.scikit-build-core
      ps.pytest
    ];
  };

  # `blackwell-stack` runs the checkout's src/ (PYTHONPATH, set below), so
  # edits take effect without a rebuild.
  cliFromCheckout = writeShellScriptBin "blackwell-stack" ''
    exec ${pythonEnv}/bin/python -m blackwell_stack "$@"
  '';
in
# sgl-kernel's CMakeLists sets policies CMP0169/CMP0177 that CMake < 3.30/3.31 rejects.
assert lib.assertMsg (lib.versionAtLeast cmake.version "3.31")
  "blackwell-stack dev shell: cmake ${cmake.version} is older than 3.31; sgl-kernel's CMakeLists needs CMP0177";
mkShell {
  packages = [
    pythonEnv
    cliFromCheckout
    cudaPackages_13_0.cuda_nvcc
    cudaPackages_13_0.cuda_cudart
    cudaPackages_13_0.cuda_cccl
    cmake
    ninja
  ];

  shellHook = ''
    # The CLI from this checkout (src/ on PYTHONPATH).
    if [ -f "$PWD/flake.nix" ] && [ -d "$PWD/src/blackwell_stack" ]; then
      export PYTHONPATH="$PWD/src''${PYTHONPATH:+:$PYTHONPATH}"
    fi
    echo "blackwell-stack dev shell: nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), cmake ${cmake.version}"
    python -c '
    import torch
    available = torch.cuda.is_available()
    print(f"torch {torch.__version__} (built for CUDA {torch.version.cuda})")
    print(f"CUDA available: {available}")
    print("GPU: " + (torch.cuda.get_device_name(0) if available else "none visible (no driver or no GPU here)"))
    ' || echo "torch could not be imported; see the error above"
  '';
}
