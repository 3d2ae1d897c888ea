# The flake's `lib`: pure functions over the project's JSON data, builtins only,
# so that tests evaluate them with a bare nix-instantiate (no nixpkgs needed).
{
  stacks = import ./stacks.nix;
  kernelSources = import ./kernel-sources.nix;
  kernelRecipe = import ./kernel-recipe.nix;
  sglangService = import ./sglang-service.nix;
  nixpkgsConfig = import ../nix/nixpkgs-config.nix;
}
