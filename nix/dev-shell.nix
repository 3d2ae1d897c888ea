# `nix develop`: the default stack's environment with what builds sgl-kernel
# beside it (scikit-build-core and wheel from the same set, CMake, ninja, the
# CUDA 13.0 tree), the runtime variables the environment needs
# (passthru.blackwellStack.environment: CUDA_HOME, CC, CXX,
# TRITON_LIBCUDA_PATH), and `blackwell-stack` running this checkout's src/.
# On a host that is not NixOS it exposes the host's driver libraries
# (./host-driver.sh). The banner runs the check that first proved a torch on
# the target host.
{ pkgs, pythonSet }:
let
  inherit (pkgs) lib;
  env = pythonSet.blackwellStackDevEnv;
  stack = env.passthru.blackwellStack;

  # Where distributions install the driver's libraries: Debian and Ubuntu,
  # Fedora and RHEL, WSL.
  hostDriverDirs = [
    "/usr/lib/x86_64-linux-gnu"
    "/usr/lib64"
    "/usr/lib/wsl/lib"
  ];

  cliFromCheckout = pkgs.writeShellScriptBin "blackwell-stack" ''
    exec ${env}/bin/python -m blackwell_stack "$@"
  '';
in
# sgl-kernel's CMakeLists sets policies CMP0169/CMP0177 that CMake < 3.30/3.31 rejects.
assert lib.assertMsg (lib.versionAtLeast pkgs.cmake.version "3.31")
  "blackwell-stack dev shell: cmake ${pkgs.cmake.version} is older than 3.31; sgl-kernel's CMakeLists needs CMP0177";
pkgs.mkShell {
  packages = [
    env
    cliFromCheckout
    stack.cudaHome
    stack.cc
    pkgs.cmake
    pkgs.ninja
  ];

  shellHook = ''
    # The environment's runtime variables, after stdenv's setup (whose
    # compiler hook exports CC and CXX of its own).
    ${lib.concatStringsSep "\n" (lib.mapAttrsToList (name: value: "export ${name}=${lib.escapeShellArg value}") stack.environment)}
    # A host that is not NixOS has its driver elsewhere (./host-driver.sh).
    ${builtins.readFile ./host-driver.sh}
    blackwell_stack_host_driver ${lib.escapeShellArg "${pkgs.addDriverRunpath.driverLink}/lib"} \
      "''${XDG_CACHE_HOME:-$HOME/.cache}/blackwell-stack/host-driver" \
      ${lib.escapeShellArgs hostDriverDirs}
    # The CLI from this checkout (src/ on PYTHONPATH).
    if [ -f "$PWD/flake.nix" ] && [ -d "$PWD/src/blackwell_stack" ]; then
      export PYTHONPATH="$PWD/src''${PYTHONPATH:+:$PYTHONPATH}"
    fi
    echo "blackwell-stack dev shell: stack ${stack.stack} (sglang ${stack.versions.sglang}, flashinfer ${stack.versions.flashinfer}, torch ${stack.versions.torch}), nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), cmake ${pkgs.cmake.version}"
    python -c '
    import torch
    available = torch.cuda.is_available()
    print(f"torch {torch.__version__} (built for CUDA {torch.version.cuda})")
    print(f"CUDA available: {available}")
    print("GPU: " + (torch.cuda.get_device_name(0) if available else "none visible (no driver or no GPU here)"))
    ' || echo "torch could not be imported; see the error above"
  '';
}
