# A stack whose kernel comes from source (stack.json kernel.from = "source":
# stable, nightly) excludes sgl-kernel from its lock (never the PyPI wheel,
# which cannot load on torch >= 2.10: stacks/stable/pyproject.toml); it is
# built here against the set's own torch, with pyproject.nix's builders
# (pkgs/sgl-kernel). A stack whose kernel is in its lock (current) gets nothing
# here. CMake, ninja and the CUDA 13.0 toolchain come from
# nixpkgs (the toolchain as ../cuda-packages.nix patches it); `ninja` in the set is the lock's Python wheel, so the binaries are
# passed by name.
{ pkgs, stacks, stack, ... }:
final: _prev:
let
  kernel = (stacks.meta stack).kernel;
in
if kernel.from != "source" then
  { }
else
  {
    ${kernel.package} = final.callPackage ../../pkgs/sgl-kernel {
      inherit (pkgs) cmake ninja;
      cudaPackages = import ../cuda-packages.nix { inherit pkgs; };
      version = kernel.version;
    };
  }
