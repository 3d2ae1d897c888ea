# The stack's own packages: sgl-kernel and sglang in every Python set (they
# take torch/triton/cudaPackages from the overlays before this one), and the
# `blackwell-stack` CLI at top level. The CLI is packaged with poetry2nix, so
# this overlay needs poetry2nix's source (the flake passes its input).
{
  poetry2nix ? null,
}:
final: prev: {
  pythonPackagesExtensions = prev.pythonPackagesExtensions ++ [
    (pyFinal: pyPrev: {
      sgl-kernel = pyFinal.callPackage ../pkgs/sgl-kernel { };
      sglang = pyFinal.callPackage ../pkgs/sglang { };
    })
  ];

  blackwell-stack =
    if poetry2nix == null then
      throw "blackwell-stack: the CLI is built with poetry2nix; use the flake's overlays.default, or import ./overlays { poetry2nix = <poetry2nix source>; }"
    else
      final.callPackage ../pkgs/blackwell-stack { inherit poetry2nix; };
}
