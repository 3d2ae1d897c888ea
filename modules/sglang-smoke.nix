# services.sglang.smokeTest: after the SGLang server is ready, ask it fixed
# prompts at temperature 0 (`blackwell-stack smoke`) and mark the unit failed
# when it answers with garbage. The deployment this project reproduces first
# served runs of "!", null content and the finish reason "NaN happened" while
# its health endpoint said all was well (shared FACTS section 1).
#
# Imported by modules/sglang.nix (services.sglang: enable, host, port). The
# check is an ExecStartPost placed with mkAfter, so it runs after that
# module's readiness gate; a non-zero exit fails the start and systemd stops
# the server.
{
  config,
  lib,
  pkgs,
  utils,
  ...
}:
let
  cfg = config.services.sglang;
  smoke = cfg.smokeTest;

  # A server bound to every address is reached on loopback.
  connectHost =
    if cfg.host == "0.0.0.0" then
      "127.0.0.1"
    else if cfg.host == "::" then
      "::1"
    else
      cfg.host;
  urlHost = if lib.hasInfix ":" connectHost then "[${connectHost}]" else connectHost;
  url = "http://${urlHost}:${toString cfg.port}";

  smokeArgs =
    [
      "smoke"
      url
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
      prompts at temperature 0 and the unit fails on empty content, a finish reason other
      than stop/length, degenerate text (runs of one character, looping phrases, U+FFFD)
      or HTTP errors'';

    package = lib.mkPackageOption pkgs "blackwell-stack" { };

    model = lib.mkOption {
      type = lib.types.nullOr lib.types.str;
      default = null;
      example = "Qwen/Qwen3.5-397B-A17B-NVFP4";
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
        Seconds allowed per smoke request (`--timeout`). Eight requests run one after
        another, so the unit's start timeout must leave room for them after the model load.
      '';
    };

    extraArgs = lib.mkOption {
      type = lib.types.listOf lib.types.str;
      default = [ ];
      example = [
        "--api-key"
        "token"
      ];
      description = "Further arguments of `blackwell-stack smoke`.";
    };
  };

  config = lib.mkIf (cfg.enable && smoke.enable) {
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
