# CUDA_HOME for the code that compiles CUDA at run time (flashinfer's JIT,
# sglang's jit_kernel, torch.utils.cpp_extension): one tree with the CUDA
# 13.0 compiler, the runtime's headers and libraries, the driver stub and
# CCCL, as those tools expect. flashinfer 0.6.5 (flashinfer/jit/cpp_ext.py)
# runs $CUDA_HOME/bin/nvcc, adds -isystem $CUDA_HOME/include and
# -isystem $CUDA_HOME/include/cccl, and links with -L$CUDA_HOME/lib64
# -L$CUDA_HOME/lib64/stubs -lcudart -lcuda.
#
# Every output of the compiler's packages goes in, so the tree does not depend
# on how nixpkgs splits them (bin, dev, lib, stubs, ...); nixpkgs installs
# CCCL's headers directly under include/, where -isystem $CUDA_HOME/include
# finds them. Of the libraries flashinfer's JIT modules build against, the
# headers and shared libraries go in (not their static archives, gigabytes
# no JIT module links).
#
# What each entry is for was read from flashinfer 0.6.5's sources (the headers
# its csrc/*.cu include, with this tree); the Nix rehearsal compiles its norm
# module for sm_120a with exactly this tree (docs/nix-rehearsal.md).
{ pkgs }:
let
  inherit (pkgs) lib;
  # With cuda_crt's headers patched for the lock's glibc (./cuda-packages.nix).
  cuda = import ./cuda-packages.nix { inherit pkgs; };
  everyOutput = package: map (output: package.${output}) package.outputs;
  headersAndLibraries = package: map (output: lib.getOutput output package) [
    "include"
    "lib"
  ];
in
assert lib.assertMsg (cuda.cudaMajorMinorVersion == "13.0")
  "blackwell-stack: cudaPackages_13_0 is CUDA ${cuda.cudaMajorMinorVersion} at this nixpkgs";
pkgs.symlinkJoin {
  name = "cuda-home-${cuda.cudaMajorMinorVersion}";
  paths =
    lib.concatMap everyOutput [
      cuda.cuda_nvcc
      # crt/host_config.h, which cuda_runtime.h includes: its own package from CUDA 13.0 on.
      cuda.cuda_crt
      cuda.cuda_cudart
      cuda.cuda_cccl
    ]
    ++ lib.concatMap headersAndLibraries [
      # cublasLt.h (norm, through trtllm/common/cudaUtils.h; bmm_fp8) and
      # -lcublas -lcublasLt (flashinfer/jit/gemm/core.py).
      cuda.libcublas
      # curand_kernel.h and curand.h: norm, sampling, renorm and top-k, which
      # SGLang runs at every decoding step.
      cuda.libcurand
      # nvrtc.h (cudnn_sdpa_kernel_launcher) and -lnvrtc: the CUTLASS fused
      # MoE (flashinfer/jit/fused_moe.py, the stacks' --moe-runner-backend
      # flashinfer_cutlass) and the FP8 block-scale GEMM.
      cuda.cuda_nvrtc
      # nvtx3/nvToolsExt.h: quantization (fp4/fp8 quantize).
      cuda.cuda_nvtx
    ];
  # flashinfer links from lib64 (the layout of NVIDIA's installers).
  #
  # nvcc reads the nvcc.profile beside the path it was started by (its
  # $(_HERE_), here $out/bin), a link to cuda_nvcc's, which names only
  # cuda_nvcc's and CCCL's include directories (cuda_nvcc.nix). The runtime's
  # headers are cuda_cudart's, cuda_runtime.h among them, which nvcc includes
  # in every CUDA unit. So this tree gets a profile of its own that names its
  # include/ too, as NVIDIA's installers lay it out: tvm-ffi's load_inline
  # (SGLang's jit_kernel: the KV-cache store, QK norm, RoPE) and a bare
  # `nvcc x.cu` pass no CUDA include directory.
  #
  # bin/nvcc itself is a copy, not a link: a caller that resolves the path
  # before running it would otherwise run cuda_nvcc's, beside cuda_nvcc's
  # profile, and lose the runtime's headers again. flashinfer 0.7.2 does
  # (jit/cake_gdn.py: (CUDA_HOME / "bin" / "nvcc").resolve(); its
  # cake_fmha_request_ordered.py takes include/ beside the resolved nvcc), and
  # so does torch's Inductor for its CUTLASS kernels
  # (_inductor/codegen/cuda/compile_utils.py: os.path.realpath). nixpkgs'
  # bin/nvcc is a binary wrapper (wrapProgramBinary, --inherit-argv0) that runs
  # the real nvcc with the path it was started by, so the copy reads this
  # tree's profile.
  postBuild = ''
    ln -s lib $out/lib64
    profile=$(readlink -f $out/bin/nvcc.profile)
    rm $out/bin/nvcc.profile
    cat "$profile" > $out/bin/nvcc.profile
    echo 'INCLUDES += "-I$(TOP)/include" $(_SPACE_)' >> $out/bin/nvcc.profile
    cp --remove-destination "$(readlink -f $out/bin/nvcc)" $out/bin/nvcc
  '';
  passthru = {
    inherit (cuda) cudaMajorMinorVersion;
  };
}
