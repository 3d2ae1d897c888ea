#!/bin/bash
# The environment's library resolution as the NixOS unit has it, on the GPU machine: torch and its NVIDIA
# wheels copied one prefix per wheel with the RUNPATHs our fixups write (layout.py), the driver reachable
# only at /run/opengl-driver/lib inside a private mount namespace (unshare -m: nothing changes on the host),
# no LD_LIBRARY_PATH. Then probe.py: torch.cuda.is_available(), one CUDA op, a flashinfer JIT module
# built, loaded and run, NVML. Once with the fixups before the driver fix, once with it.
#
#   benchmarks/driver-runpath/device.sh SITE_PACKAGES EXTRA_PYTHONPATH PATCHELF
# writes $OUT/driver-runpath.tar.gz (or ./out/). DRIVER_RUNPATH_CUDA_HOME_PARTS: a directory of the parts
# pack-cuda-home.sh made of the rehearsal's CUDA_HOME, which the JIT module is then compiled with (else
# the machine's /usr/local/cuda).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SITEPKG="$1"; EXTRA="$2"; PATCHELF="$3"
PY="${DRIVER_RUNPATH_PYTHON:-$(command -v python3)}"
W=/tmp/driver-runpath; R="$W/results"; FINAL="${OUT:-$PWD/out}"
rm -rf "$R"; mkdir -p "$R" "$W"
CUDA_HOME_USED=/usr/local/cuda; COMPILERS=""
if [ -n "${DRIVER_RUNPATH_CUDA_HOME_PARTS:-}" ]; then
  # The rehearsal's store, at the absolute path it was made at (its symlinks and nvcc.profile name it).
  cat "$DRIVER_RUNPATH_CUDA_HOME_PARTS"/cuda-home.tar.xz.part-* | xz -d | tar -x -C /
  CUDA_HOME_USED="$(cat "$DRIVER_RUNPATH_CUDA_HOME_PARTS"/cuda-home.path)"
  # Its backend compiler wraps the rehearsing host's GCC 12 with the lock's glibc headers; objects compiled
  # against glibc 2.43 headers may need symbols this machine's glibc lacks, so here it is the distribution's.
  backend="$(sed -n 's/^compiler-bindir *= *//p' "$CUDA_HOME_USED/bin/nvcc.profile")"
  mkdir -p "$backend"; for t in cc gcc; do ln -sf /usr/bin/gcc "$backend/$t"; done
  for t in c++ g++; do ln -sf /usr/bin/g++ "$backend/$t"; done
  COMPILERS="CC=$backend/cc CXX=$backend/c++"  # as nix/stack-env.nix sets them: the backend compiler
  { echo "CUDA_HOME=$CUDA_HOME_USED"; cat "$CUDA_HOME_USED/bin/nvcc.profile"; ls -la "$backend";
    "$CUDA_HOME_USED/bin/nvcc" --version | tail -2; } > "$R/cuda-home.txt" 2>&1
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

# Where the driver is: the libcuda.so.1 and libnvidia-ml.so.1 a normal process loads.
"$PY" - > "$R/driver.txt" 2>&1 <<'PYEOF'
import ctypes, os
for name in ("libcuda.so.1", "libnvidia-ml.so.1"):
    ctypes.CDLL(name)
with open("/proc/self/maps") as fh:
    paths = sorted({l.split()[-1] for l in fh if "/libcuda.so" in l or "/libnvidia-ml.so" in l})
for p in paths:
    print(os.path.realpath(p))
PYEOF
cat "$R/driver.txt"
DRIVER_DIR="$(dirname "$(head -1 "$R/driver.txt")")"
mkdir -p "$W/opengl-driver/lib"; cp -a "$DRIVER_DIR"/lib{cuda,nvidia}* "$W/opengl-driver/lib/" 2>/dev/null
# Every file a search could find them by: the loader cache, LD_LIBRARY_PATH, the default directories.
{ ldconfig -p | grep -oE '/[^ ]*lib(cuda|nvidia-ml)\.so[^ ]*';
  for d in ${LD_LIBRARY_PATH//:/ } /usr/lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib "$DRIVER_DIR"; do
    ls "$d"/libcuda.so* "$d"/libnvidia-ml.so* 2>/dev/null; done; } | sort -u > "$W/hide.txt"
cp "$W/hide.txt" "$R/hidden-files.txt"

for policy in needs-driver every-elf; do
  echo "== $policy"
  "$PY" "$HERE/layout.py" "$SITEPKG" "$W/$policy" --policy "$policy" --patchelf "$PATCHELF" > "$R/layout-$policy.txt" 2>&1 || { cat "$R/layout-$policy.txt"; continue; }
  cp "$W/$policy/runpaths.json" "$R/runpaths-$policy.json"
  pp="$(cat "$W/$policy/pythonpath"):$EXTRA"
  unshare -m --propagation private bash -c '
    while read -r f; do mount --bind /dev/null "$f" 2>/dev/null; done < '"$W/hide.txt"'
    mount -t tmpfs tmpfs /run && mkdir -p /run/opengl-driver/lib && mount --bind '"$W/opengl-driver/lib"' /run/opengl-driver/lib
    python3 -c "import ctypes; ctypes.CDLL(\"libcuda.so.1\")" 2>/dev/null && echo "NOT HIDDEN: the process finds libcuda.so.1 without a RUNPATH" || echo "hidden: libcuda.so.1 is not found by name"
    cd /tmp && env -u LD_LIBRARY_PATH PYTHONPATH='"$pp"' CUDA_HOME='"$CUDA_HOME_USED $COMPILERS"' FLASHINFER_WORKSPACE_BASE='"$W/jit-$policy"' timeout 600 '"$PY"' -X faulthandler '"$HERE/probe.py"'
    echo "exit code $?"' > "$R/probe-$policy.txt" 2>&1
  cat "$R/probe-$policy.txt"
  # What the JIT module links and how it finds it (flashinfer gives it no RUNPATH).
  find "$W/jit-$policy" -name '*.so' -exec sh -c 'echo "== $1"; readelf -d "$1" | grep -E "NEEDED|RUNPATH|RPATH"' _ {} \; \
    > "$R/jit-$policy-dynamic.txt" 2>&1
  find "$W/jit-$policy" -name build.ninja -path '*norm*' -exec cp {} "$R/jit-$policy-norm.ninja" \; 2>/dev/null
  rm -rf "${W:?}/$policy"
done
mkdir -p "$FINAL"; tar -czf "$FINAL/driver-runpath.tar.gz" -C "$W" results
