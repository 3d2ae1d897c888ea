# `nix develop` on a host that is not NixOS. Everything the stack's environment
# reads of the NVIDIA driver points at NixOS' driver link (the wheels'
# RUNPATHs, the by-name loads rewritten in Python, TRITON_LIBCUDA_PATH), which
# only NixOS makes. Elsewhere the host's driver is in its own library
# directory, which the environment's loader (Nix's glibc) does not search, and
# which also holds the host's glibc and libstdc++, which must not come before
# Nix's. So, as nix-gl-host does: find the directory of the host's
# libcuda.so.1 (the host's ldconfig cache, then its usual directories), link
# only the driver's libraries (libcuda*, libnvidia-*) into a directory of the
# user's, and put that one on LD_LIBRARY_PATH, where libcuda also finds its
# own libnvidia-* (its RUNPATH is empty, unlike nixpkgs' build of it). Loads
# by path (cuda-bindings, pynvml, torch.cuda's NVML) need the driver link
# itself: the shell prints the command that makes it.
#
#   blackwell_stack_host_driver DRIVER_LINK_LIB OWN_DIR [HOST_DIR...]
blackwell_stack_host_driver() {
  local link=$1 own=$2 found="" dir file
  shift 2
  if [ -e "$link/libcuda.so.1" ]; then
    return 0
  fi
  if [ -x /sbin/ldconfig ]; then
    found=$(/sbin/ldconfig -p 2>/dev/null \
      | sed -n 's|^[[:space:]]*libcuda\.so\.1 (libc6,x86-64) => \(/.*\)/libcuda\.so\.1$|\1|p' | head -n 1)
  fi
  for dir in "$@"; do
    if [ -z "$found" ] && [ -e "$dir/libcuda.so.1" ]; then
      found=$dir
    fi
  done
  if [ -z "$found" ]; then
    echo "NVIDIA driver: none found ($link, the host's ldconfig cache and $* have no libcuda.so.1)" >&2
    return 0
  fi
  mkdir -p "$own"
  find "$own" -maxdepth 1 -type l -delete
  for file in "$found"/libcuda.so* "$found"/libnvidia-*.so*; do
    if [ -e "$file" ]; then
      ln -s "$file" "$own/"
    fi
  done
  export LD_LIBRARY_PATH="$own${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TRITON_LIBCUDA_PATH="$own"
  echo "NVIDIA driver: the host's, in $found (its libcuda and libnvidia-* only, through LD_LIBRARY_PATH=$own)."
  echo "Code that loads the driver by path looks in $link (cuda-bindings, pynvml, torch.cuda's NVML); make it as root:"
  echo "  sudo mkdir -p $link && sudo ln -sf $found/libcuda.so* $found/libnvidia-*.so* $link/"
}
