# `nix flake check`: what can be asserted without a GPU or KVM. Each check evaluates
# its assertion against the real pinned nixpkgs and writes what it checked;
# GPU checks stay out of here: they need requiredSystemFeatures = [ "cuda" ]
# (./gpu-checks.nix, the flake's gpuChecks; sgl-kernel's passthru.gpuCheck).
{
  pkgs,
  packages,
  sets,
}:
let
  inherit (pkgs) lib;
  stacks = import ../lib/stacks.nix;
  inherit (stacks) lockedNames;

  # An assertion that becomes a tiny derivation recording what it checked.
  assertion =
    name: ok: message:
    assert lib.assertMsg ok "blackwell-stack check ${name}: ${message}";
    pkgs.runCommand "check-${name}" { } ''
      echo ${lib.escapeShellArg message} > $out
    '';

  perStack = lib.concatMapAttrs (
    name: set:
    let
      bs = set.blackwellStackEnv.passthru.blackwellStack;
      versions = stacks.versions name;
      kernel = (stacks.meta name).kernel;
      audit = lib.importJSON (../stacks + "/${name}/wheels.json");
      kernelPair = audit.torch_pairs.pairs.${kernel.package};
    in
    {
      "stack-${name}-versions" =
        assertion "stack-${name}-versions"
          (
            bs.versions == versions
            && set.torch.version == versions.torch
            && set.sglang.version == versions.sglang
            && set.${(stacks.meta name).versions_from_lock.flashinfer}.version == versions.flashinfer
          )
          "the ${name} environment carries the lock's sglang ${versions.sglang}, flashinfer ${versions.flashinfer} and torch ${versions.torch}";

      "stack-${name}-kernel-torch" =
        if kernel.from == "source" then
          assertion "stack-${name}-kernel-torch" (set.${kernel.package}.passthru.torch == set.torch)
            "${kernel.package} of the ${name} stack is built against that stack's own torch ${set.torch.version}"
        else
          # A prebuilt kernel from the lock: stack audit read its symbol tables against the locked torch.
          assertion "stack-${name}-kernel-torch"
            (
              set.${kernel.package}.version == stacks.lockedVersion name kernel.package
              && kernelPair.ok
              && audit.torch_pairs.torch == set.torch.version
            )
            "${kernel.package} ${set.${kernel.package}.version} of the ${name} stack is the locked wheel; ${kernelPair.found} (stacks/${name}/wheels.json)";

      "stack-${name}-cuda-home" =
        assertion "stack-${name}-cuda-home" (bs.cudaHome.cudaMajorMinorVersion == "13.0")
          "CUDA_HOME of the ${name} stack is CUDA ${bs.cudaHome.cudaMajorMinorVersion}";
    }
  ) (lib.getAttrs lockedNames sets);
in
perStack
// {
  cmake-version =
    assertion "cmake-version" (lib.versionAtLeast pkgs.cmake.version "3.31")
      "cmake ${pkgs.cmake.version} is at least 3.31 (sgl-kernel sets CMP0177)";

  # The CLI builds and imports (pythonImportsCheck), and its tests that need
  # neither network, nor a GPU, nor nix (the sandbox has none) pass.
  cli = packages.blackwell-stack;
  cli-tests =
    pkgs.runCommand "check-cli-tests"
      {
        nativeBuildInputs = [
          (pkgs.python312.withPackages (ps: [
            ps.pytest
            ps.hypothesis
            ps.matplotlib
            ps.packaging
          ]))
        ];
        src = lib.cleanSource ../.;
      }
      ''
        cp -r $src source && chmod -R u+w source && cd source
        export HOME=$TMPDIR PYTHONPATH=$PWD/src
        python -m pytest -q -p no:cacheprovider -m "not network and not nix and not cuda and not slow" tests
        touch $out
      '';
}
