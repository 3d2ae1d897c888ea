# services.sglang.smokeTest: after the SGLang server is ready, ask it fixed
# prompts at temperature 0 (`blackwell-stack smoke`) and fail the start when
# it answers with garbage. The deployment this project reproduces first served
# runs of "!", null content and the finish reason "NaN happened" while its
# health endpoint said all was well (docs/nixos-module.md, "Failure policy").
#
# Imported by modules/sglang.nix (services.sglang: enable, serverUrl,
# apiKeyFile). The check is an ExecStartPost placed with mkAfter, so it runs
# after that module's readiness gate. A non-zero exit fails the start: systemd
# stops the server with result `exit-code`, the smoke report stays in the
# journal, and Restart=on-abnormal does not reload the weights to get the same
# garbage again.
{
  config,
  lib,
  utils,
  ...
}:
let
  cfg = config.services.sglang;
  smoke = cfg.smokeTest;

  # `blackwell-stack smoke` sends each of its 4 prompts twice (stream and not,
  # verify/smoke.py PROMPTS) after one /v1/models request, each bounded by --timeout.
  requests = 4 * 2 + 1;

  # Option strings argparse (allow_abbrev) could read as the smoke command's
  # --api-key: the key would land in the Nix store. --api-key-file is fine.
  namesTheKey =
    arg:
    let
      name = builtins.head (lib.splitString "=" arg);
    in
    lib.hasPrefix "--" arg && builtins.stringLength name > 2 && lib.hasPrefix name "--api-key";

  smokeArgs = [
    "smoke"
    cfg.serverUrl
    "--max-tokens"
    (toString smoke.maxTokens)
    "--timeout"
    (toString smoke.timeout)
  ]
  ++ lib.optionals (smoke.model != null) [
    "--model"
    smoke.model
  ]
  ++ smoke.extraArgs;
in
{
  options.services.sglang.smokeTest = {
    enable = lib.mkEnableOption ''
      a garbage-output check after the server is ready: `blackwell-stack smoke` asks fixed
      prompts at temperature 0 and the start fails on empty content, a finish reason other
      than stop/length, degenerate text (runs of one character, looping phrases, U+FFFD)
      or HTTP errors'';

    package = lib.mkOption {
      type = lib.types.nullOr lib.types.package;
      default = null;
      example = lib.literalExpression "blackwell-stack.packages.x86_64-linux.blackwell-stack";
      description = ''
        The blackwell-stack CLI that runs the check. The flake's `nixosModules.sglang` sets it
        to the flake's `packages.<system>.blackwell-stack`.
      '';
    };

    model = lib.mkOption {
      type = lib.types.nullOr lib.types.str;
      default = null;
      example = "nvidia/Qwen3.5-397B-A17B-NVFP4";
      description = ''
        Model name sent with each prompt. `null` asks for the first model that the
        server lists at `/v1/models` (SGLang lists the one it serves).
      '';
    };

    maxTokens = lib.mkOption {
      type = lib.types.ints.positive;
      default = 128;
      description = "Tokens per smoke answer (`--max-tokens`).";
    };

    timeout = lib.mkOption {
      type = lib.types.ints.positive;
      default = 300;
      description = ''
        Seconds allowed per smoke request (`--timeout`). Nine requests run one after
        another; the unit's start budget grows by their sum. The first may wait for
        SGLang's first-use JIT compiles (about 2 minutes measured on 16 cores) that
        the server's own warm-up did not reach.
      '';
    };

    extraArgs = lib.mkOption {
      type = lib.types.listOf lib.types.str;
      default = [ ];
      example = [ "--json" ];
      description = ''
        Further arguments of `blackwell-stack smoke`. The API key is passed from
        `services.sglang.apiKeyFile` by itself; `--api-key` here is refused.
      '';
    };

    budgetSec = lib.mkOption {
      type = lib.types.ints.unsigned;
      readOnly = true;
      internal = true;
      default = if cfg.enable && smoke.enable then requests * smoke.timeout else 0;
      description = "Seconds the smoke test may take at most (part of the unit's start budget).";
    };
  };

  config = lib.mkIf (cfg.enable && smoke.enable) {
    assertions = [
      {
        assertion = smoke.package != null;
        message = ''
          services.sglang.smokeTest.package is not set: import blackwell-stack.nixosModules.sglang (which sets it
          to the flake's packages.<system>.blackwell-stack), or set it to the blackwell-stack CLI.'';
      }
      {
        assertion = !(lib.any namesTheKey smoke.extraArgs);
        message = ''
          services.sglang.smokeTest.extraArgs: --api-key (in any spelling) would put the key in the Nix store;
          the smoke test reads services.sglang.apiKeyFile by itself.'';
      }
    ];

    systemd.services.sglang.serviceConfig.ExecStartPost = lib.mkAfter [
      (
        "${lib.getExe' smoke.package "blackwell-stack"} ${utils.escapeSystemdExecArgs smokeArgs}"
        # The key that sglang.nix hands over with LoadCredential=api-key:...; %d is the
        # unit's credentials directory (systemd.unit(5)), so it must stay unescaped.
        + lib.optionalString (cfg.apiKeyFile != null) " --api-key-file %d/api-key"
      )
    ];
  };
}
