# CUDA_HOME for the code that compiles CUDA at run time (flashinfer's JIT,
# sglang's jit_kernel, torch.utils.cpp_extension): one tree with the CUDA
# 13.0 compiler, the runtime's headers and libraries, the driver stub and
# CCCL, as those tools expect. flashinfer 0.6.5 (flashinfer/jit/cpp_ext.py)
# runs $CUDA_HOME/bin/nvcc, adds -I$CUDA_HOME/include and
# -I$CUDA_HOME/include/cccl, and links with -L$CUDA_HOME/lib64
# -L$CUDA_HOME/lib64/stubs -lcudart -lcuda.
#
# Every output of each package goes in, so the tree does not depend on how
# nixpkgs splits them (bin, dev, lib, stubs, ...); nixpkgs installs CCCL's
# headers directly under include/, where the -I$CUDA_HOME/include finds them.
{ pkgs }:
let
  inherit (pkgs) lib;
  cuda = pkgs.cudaPackages_13_0;
  everyOutput = package: map (output: package.${output}) package.outputs;
in
assert lib.assertMsg (cuda.cudaMajorMinorVersion == "13.0")
  "blackwell-stack: cudaPackages_13_0 is CUDA ${cuda.cudaMajorMinorVersion} at this nixpkgs";
pkgs.symlinkJoin {
  name = "cuda-home-${cuda.cudaMajorMinorVersion}";
  paths = lib.concatMap everyOutput [
    cuda.cuda_nvcc
    cuda.cuda_cudart
    cuda.cuda_cccl
  ];
  # flashinfer links from lib64 (the layout of NVIDIA's installers).
  postBuild = ''
    ln -s lib $out/lib64
  '';
  passthru = {
    inherit (cuda) cudaMajorMinorVersion;
  };
}
