#!/bin/bash
# The rehearsal's CUDA_HOME (nix/cuda-home.nix joined from NVIDIA's wheels laid out as nixpkgs lays them
# out, tests/test_rehearsal_cuda_home.py), packed for the GPU machine in parts a call can carry.
#
#   python3 -m pytest --basetemp=/tmp/cuda-rehearsal tests/test_rehearsal_cuda_home.py -k joins
#   benchmarks/driver-runpath/pack-cuda-home.sh /tmp/cuda-rehearsal/rehearsal0/store .dev/cuda-home
#
# The store is packed at its absolute path, which its symlinks and nvcc.profile name. Left out: the
# libraries a flashinfer norm module never loads (cuBLAS, cuRAND, NVRTC: 914 MB) and the lock's glibc
# headers with the backend compiler wrapping them (device.sh uses the machine's GCC and glibc instead).
set -euo pipefail
STORE="$(cd "$1" && pwd)"; DEST="$2"
mkdir -p "$DEST"; rm -f "$DEST"/cuda-home.tar.xz.part-*
tar -cf - --exclude='libcublas-*-lib' --exclude='libcurand-*-lib' --exclude='cuda_nvrtc-*-lib' \
    --exclude='libc6-dev-*' --exclude='backend-cc' -C / "${STORE#/}" \
  | xz -T0 -6 | split -b 40M -d - "$DEST/cuda-home.tar.xz.part-"
ls -d "$STORE"/cuda-home-* | head -1 > "$DEST/cuda-home.path"
ls -la "$DEST"; cat "$DEST/cuda-home.path"
