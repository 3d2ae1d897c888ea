# Checks that need the GPU host: built only by a Nix whose sandbox can reach
# the GPU. They use nixpkgs' mechanism for that, read at the lock's nixpkgs
# (stored copies of these files; the lock's revision itself cannot be fetched
# here):
#   - pkgs/development/cuda-modules/packages/writeGpuTestPython.nix: a tester
#     whose passthru.gpuCheck is a runCommand with
#     `requiredSystemFeatures = [ feature ]` (feature "cuda" by default) that
#     runs it. Its interpreter is `python3Packages.python.withPackages`, i.e.
#     nixpkgs' Python packages; the stacks' packages are uv2nix's, in a
#     virtual environment, so the checks below are that gpuCheck's
#     runCommand, with the stack's environment instead of withPackages.
#   - nixos/modules/programs/nix-required-mounts.nix: `enable` installs a
#     pre-build-hook; `presets.nvidia-gpu.enable` adds the preset's features
#     (pkgs/by-name/ni/nix-required-mounts/package.nix: "gpu" "nvidia-gpu"
#     "opengl" "cuda") to nix.settings.system-features and mounts the driver
#     (addDriverRunpath.driverLink, hardware.graphics) and /dev/nvidia* into
#     the sandbox of a derivation that requires one of them. The NixOS module
#     turns it on with services.sglang.gpuChecks.enable.
#   - pkgs/development/python-modules/torch/tests: torch's GPU checks are such
#     testers (`nix build ...tester-cudaAvailable.gpuCheck`), outside any
#     default check set.
# Without a "cuda" builder Nix refuses them before they start ("a
# 'x86_64-linux' with features {cuda} is required to build ..."), so they are
# not in the flake's `checks` (which `nix flake check` builds anywhere):
#   nix build .#gpuChecks.sgl-kernel -L
{
  pkgs,
  packages,
  sets,
  # The acceptance check's inputs, as store paths (the sandbox has no
  # network): a model directory SGLang serves, and GSM8K's train.jsonl and
  # test.jsonl (docs/accuracy-gate.md says which files, by sha256).
  acceptanceModel ? null,
  gsm8kData ? null,
}:
let
  inherit (pkgs) lib;
  stacks = import ../lib/stacks.nix;
  stack = stacks.default;
  set = sets.${stack};
  env = set.blackwellStackEnv;
  kernel = set.${(stacks.meta stack).kernel.package};
  cli = packages.blackwell-stack;

  # pytest, which upstream's kernel tests run under, is not in the stack's
  # lock: nixpkgs' pytest with the two packages it needs that the lock lacks
  # (pluggy, iniconfig), on PYTHONPATH. Only these, so the environment's own
  # packaging and pygments are the ones imported.
  pythonPackages = pkgs.python312.pkgs;
  pytestModules = pkgs.runCommand "pytest-for-${stack}" { } ''
    mkdir -p $out
    for package in ${
      lib.concatMapStringsSep " " (p: "${p}/${pkgs.python312.sitePackages}") [
        pythonPackages.pytest
        pythonPackages.pluggy
        pythonPackages.iniconfig
      ]
    }; do
      ln -s "$package"/* $out/
    done
  '';

  # A check: runs `script` with the stack's environment and the CLI on PATH,
  # in a sandbox that nix-required-mounts opens to the GPU. It first asks
  # whether the GPU is visible there: without the host option, the failure
  # says what to turn on instead of a kernel test's error.
  gpuCheck =
    name: script:
    pkgs.runCommand "blackwell-stack-gpu-check-${name}"
      {
        nativeBuildInputs = [ cli ] ++ env.passthru.blackwellStack.path;
        requiredSystemFeatures = [ "cuda" ];
        env = env.passthru.blackwellStack.environment;
        passthru = {
          inherit script;
          stackEnvironment = env;
        };
      }
      ''
        export HOME="$TMPDIR"
        ${env}/bin/python - <<'EOF'
        import sys
        import torch
        if not torch.cuda.is_available():
            sys.exit("blackwell-stack gpu check: torch sees no CUDA GPU in the build sandbox. Build this on the GPU "
                     "host with services.sglang.gpuChecks.enable = true (programs.nix-required-mounts and its "
                     "nvidia-gpu preset), or a builder that has the 'cuda' system feature.")
        print(f"GPU in the sandbox: {torch.cuda.get_device_name()} ({torch.version.cuda=})")
        EOF
        mkdir -p $out
        ${script}
      '';
in
{
  # The kernel's import, then `kernel test --smoke` (its subset and time
  # limits are kernel-tests.json's) against upstream's tests of the sglang
  # tree the kernel was built from; the report is $out/kernel-test.json.
  sgl-kernel = gpuCheck "sgl-kernel-${stack}" ''
    ${env}/bin/python -c 'import sgl_kernel; print("sgl_kernel", sgl_kernel.__file__)'
    PYTHONPATH="${pytestModules}" blackwell-stack kernel test --smoke \
      --python ${env}/bin/python --tests ${kernel.src}/sgl-kernel/tests \
      --logs "$out/logs" --json > "$out/kernel-test.json"
  '';

  # The acceptance run (`blackwell-stack acceptance`) on the model and data
  # given above; without them it stops at once, saying what to pass.
  acceptance = gpuCheck "acceptance-${stack}" (
    if acceptanceModel == null || gsm8kData == null then
      ''
        echo "blackwell-stack gpu check: the acceptance check needs acceptanceModel and gsm8kData as store paths (import nix/gpu-checks.nix with them)" >&2
        exit 1
      ''
    else
      ''
        blackwell-stack acceptance --stack ${stack} --python ${env}/bin/python \
          --set model-path=${acceptanceModel} --gsm8k-data ${gsm8kData} \
          --kernel-tests ${kernel.src}/sgl-kernel/tests --report-dir "$out/report"
      ''
  );
}
