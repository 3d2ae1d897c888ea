# A stack's environment: a virtual environment of the stack's own
# requirements (the lock's virtual root) and the source-built kernel, made by
# pyproject.nix's mkVirtualEnv from the stack's Python set.
#
# passthru.blackwellStack is the interface the NixOS module (and anyone
# running the environment outside it) relies on:
#   stack        the stack's name
#   versions     { sglang; flashinfer; torch; } as the lock has them
#   cudaHome     a CUDA 13.0 tree: bin/nvcc, include (cudart, CCCL), lib (nix/cuda-home.nix)
#   cc           a package with bin/cc and bin/c++ that nvcc 13.0 accepts
#   environment  what the environment needs at run time, as variables:
#                CUDA_HOME (flashinfer's and sglang's JIT), CC/CXX (triton
#                compiles its launcher with $CC, flashinfer passes it to nvcc
#                as -ccbin), TRITON_LIBCUDA_PATH (triton otherwise asks
#                /sbin/ldconfig, which NixOS does not have: NixOS/nixpkgs#426296)
#   path         what must be on PATH at run time: the environment's bin
#                (ninja for flashinfer's JIT), nvcc, cc
# The environment itself is not wrapped: the module sets these for the
# service, `nix develop` for a shell.
{
  pkgs,
  stack,
  pythonSet,
  # More of the set in the environment (the dev shell adds the kernel's build tools).
  extraSpec ? { },
  name ? "sglang-env-${stack}",
}:
let
  inherit (pkgs) lib;
  stacks = import ../lib/stacks.nix;
  meta = stacks.meta stack;
  collisions = lib.importJSON ./fixups/env-collisions.json;
  cudaHome = import ./cuda-home.nix { inherit pkgs; };
  cc = (import ./cuda-packages.nix { inherit pkgs; }).backendStdenv.cc;

  spec =
    lib.genAttrs (stacks.rootDependencies stack) (_: [ ])
    // lib.optionalAttrs (meta.kernel.from == "source") { ${meta.kernel.package} = [ ]; }
    // extraSpec;

  env = (pythonSet.mkVirtualEnv name spec).overrideAttrs (old: {
    # Files two wheels ship with different contents (nix/fixups/env-collisions.json).
    venvSkip = (old.venvSkip or [ ]) ++ map (path: "${pythonSet.python.sitePackages}/${path}") (
      builtins.attrNames collisions.skip
    );
    passthru = (old.passthru or { }) // {
      blackwellStack = {
        inherit stack cudaHome cc;
        versions = stacks.versions stack;
        environment = {
          CUDA_HOME = "${cudaHome}";
          CC = "${cc}/bin/cc";
          CXX = "${cc}/bin/c++";
          TRITON_LIBCUDA_PATH = "${pkgs.addDriverRunpath.driverLink}/lib";
        };
        path = [
          env
          cudaHome
          cc
        ];
      };
    };
    meta = (old.meta or { }) // {
      description = "Python ${meta.python} environment of the ${stack} serving stack: ${meta.description}";
      platforms = [ meta.system ];
    };
  });
in
env
