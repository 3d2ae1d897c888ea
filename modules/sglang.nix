# services.sglang: SGLang serving the profile in modules/profiles/ (by default
# Qwen3.5-397B-A17B-NVFP4 on 8x RTX PRO 6000 Blackwell, SM120, PCIe).
#
# The argv is rendered by lib/sglang-service.nix (`render`), the same function
# the tests compare with `blackwell-stack serve render`; every rule of
# modules/rules.json becomes an assertion (errors) or a warning, and choices
# are enums taken from the default profile's SGLang flag table (modules/sglang-flags/<version>.json).
{
  config,
  lib,
  pkgs,
  utils,
  ...
}:
let
  inherit (lib) mkOption types literalExpression;

  cfg = config.services.sglang;
  service = import ../lib/sglang-service.nix;
  table = service.flagTable;

  # A flag's choices in the pinned SGLang, as an option type.
  choicesOf = flag: types.enum table.flags.${flag}.choices;
  profileValue = flag: cfg.profile.flags.${flag}.value or table.flags.${flag}.default;

  # An option for one SGLang flag whose default is the profile's value.
  profileFlagOption =
    flag:
    { type, example, description }:
    mkOption {
      inherit type example description;
      default = profileValue flag;
      defaultText = literalExpression ''config.services.sglang.profile.flags."${flag}".value'';
    };

  # The module's typed options, as flag settings on top of the profile (a null
  # value removes the flag; false renders nothing for a switch).
  overrides = {
    "--model-path" = if cfg.model.path != null then cfg.model.path else cfg.model.id;
    "--revision" = if cfg.model.path != null then null else cfg.model.revision;
    "--host" = cfg.host;
    "--port" = cfg.port;
    "--quantization" = cfg.quantization;
    "--attention-backend" = cfg.attentionBackend;
    "--moe-runner-backend" = cfg.moeRunnerBackend;
    "--fp4-gemm-backend" = cfg.fp4GemmBackend;
    "--kv-cache-dtype" = cfg.kvCacheDtype;
    "--disable-custom-all-reduce" = cfg.disableCustomAllReduce;
    "--tensor-parallel-size" = cfg.tensorParallelSize;
    "--nnodes" = if cfg.nnodes == 1 then null else cfg.nnodes;
    "--node-rank" = if cfg.nnodes == 1 then null else cfg.nodeRank;
    "--dist-init-addr" = cfg.distInitAddr;
  };

  rendered = service.render {
    profile = cfg.profile;
    inherit overrides;
    inherit (cfg) extraArgs;
    env = cfg.environment;
  };

  ignored = v: builtins.elem v.id cfg.ignoredRules;

  stateDirIsDefault = cfg.stateDir == "/var/lib/sglang";

  # Reads the API key from the systemd credential inside the process (see the
  # script's docstring for why not --api-key in ExecStart).
  launcher = builtins.path {
    path = ../src/blackwell_stack/serve/launcher.py;
    name = "sglang-launcher.py";
  };
  python = "${cfg.finalPackage}/bin/python3";

  connectHost =
    if cfg.host == "0.0.0.0" then "127.0.0.1"
    else if cfg.host == "::" then "::1"
    else cfg.host;
  healthUrl = "http://${if lib.hasInfix ":" connectHost then "[${connectHost}]" else connectHost}:${toString cfg.port}/health";

  # Readiness gate: the unit becomes active only once /health answers 200
  # (SGLang serves /health without the API key: srt/utils/auth.py). It gives up
  # as soon as the server process is gone, so a crash is not waited out.
  readinessGate = pkgs.writeShellScript "sglang-wait-healthy" ''
    while ! ${lib.getExe pkgs.curl} --silent --fail --max-time 5 --output /dev/null ${lib.escapeShellArg healthUrl}; do
      if ! kill -0 "$MAINPID" 2>/dev/null; then
        echo "sglang exited before ${healthUrl} answered" >&2
        exit 1
      fi
      sleep ${toString cfg.readiness.intervalSec}
    done
  '';
in
{
  imports = [
    # services.sglang.smokeTest (issue 6): its ExecStartPost comes after the readiness gate.
    ./sglang-smoke.nix
  ];

  options.services.sglang = {
    enable = lib.mkEnableOption "SGLang serving the blackwell-stack profile (Qwen3.5-397B-A17B-NVFP4 on SM120 by default)";

    package = mkOption {
      type = types.package;
      default = pkgs.python312.withPackages (ps: [ ps.sglang ]);
      defaultText = literalExpression "pkgs.python312.withPackages (ps: [ ps.sglang ])";
      description = ''
        A Python environment with SGLang (the flake's `packages.sglang-env`). Its
        `bin/python3` runs `sglang.launch_server`.
      '';
    };

    profile = mkOption {
      type = types.attrs;
      default = service.defaultProfile;
      defaultText = literalExpression "lib.importJSON ./profiles/qwen3.5-397b-a17b-nvfp4-sm120.json";
      description = ''
        The serving profile (model, hardware, flags, environment; see
        `modules/profiles/`). The typed options below default to its values, and the
        rules check the flags against its hardware.
      '';
    };

    model = {
      id = mkOption {
        type = types.str;
        default = cfg.profile.model.id;
        defaultText = literalExpression "config.services.sglang.profile.model.id";
        example = "nvidia/Qwen3.5-397B-A17B-NVFP4";
        description = "Hugging Face repository of the checkpoint (`--model-path`), used when `model.path` is null.";
      };
      revision = mkOption {
        type = types.nullOr (types.strMatching "[0-9a-f]{40}");
        default = cfg.profile.model.revision;
        defaultText = literalExpression "config.services.sglang.profile.model.revision";
        example = "0123456789abcdef0123456789abcdef01234567";
        description = "The commit of `model.id` to load (`--revision`); null loads the newest upload (a warning).";
      };
      path = mkOption {
        type = types.nullOr (types.strMatching "/.*");
        default = null;
        example = "/srv/models/Qwen3.5-397B-A17B-NVFP4";
        description = ''
          A local checkpoint directory; when set it is the `--model-path` and
          `model.id`/`model.revision` are not used. It must be readable by the
          service's dynamic user.
        '';
      };
    };

    tensorParallelSize = profileFlagOption "--tensor-parallel-size" {
      type = types.ints.positive;
      example = 8;
      description = "Tensor parallel size (`--tensor-parallel-size`); larger than the GPUs of all nodes is an error.";
    };

    quantization = profileFlagOption "--quantization" {
      type = types.nullOr (choicesOf "--quantization");
      example = "modelopt_fp4";
      description = "`--quantization`; `modelopt_fp4` for the NVFP4 (ModelOpt) checkpoint.";
    };

    attentionBackend = profileFlagOption "--attention-backend" {
      type = types.nullOr (choicesOf "--attention-backend");
      example = "triton";
      description = "`--attention-backend`. On SM120 `fa3` (sm_90a only), `trtllm_mha` (SM100 only) and the MLA backends are refused.";
    };

    moeRunnerBackend = profileFlagOption "--moe-runner-backend" {
      type = choicesOf "--moe-runner-backend";
      example = "flashinfer_cutlass";
      description = "`--moe-runner-backend`. On SM120 `flashinfer_trtllm` (SM100 only) and `flashinfer_cutedsl` (NaN) are refused.";
    };

    fp4GemmBackend = mkOption {
      type = choicesOf "--fp4-gemm-backend";
      default = profileValue "--fp4-gemm-backend";
      defaultText = literalExpression ''config.services.sglang.profile.flags."--fp4-gemm-backend".value'';
      example = "flashinfer_cudnn";
      description = ''
        `--fp4-gemm-backend` (dest `fp4_gemm_runner_backend`; `--fp4-gemm-runner-backend`
        does not exist). On SM120 `flashinfer_trtllm` and, before the fix of flashinfer
        PR #2716, `flashinfer_cutlass` (SGLang 0.5.9's default) are refused.
      '';
    };

    kvCacheDtype = profileFlagOption "--kv-cache-dtype" {
      type = choicesOf "--kv-cache-dtype";
      example = "bf16";
      description = "`--kv-cache-dtype`. FP8 without calibrated k/v scales is refused (silent long-context degradation).";
    };

    disableCustomAllReduce = mkOption {
      type = types.bool;
      default = profileValue "--disable-custom-all-reduce";
      defaultText = literalExpression ''config.services.sglang.profile.flags."--disable-custom-all-reduce".value'';
      description = "`--disable-custom-all-reduce`; required on PCIe-only GPUs (the custom kernel needs P2P/NVLink).";
    };

    host = mkOption {
      type = types.str;
      default = cfg.profile.service.host;
      defaultText = literalExpression "\"127.0.0.1\"";
      example = "0.0.0.0";
      description = "Address the HTTP server listens on (`--host`).";
    };

    port = mkOption {
      type = types.port;
      default = cfg.profile.service.port;
      defaultText = literalExpression "30000";
      description = "Port of the HTTP server (`--port`).";
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      description = "Open `port` in the firewall. Multi-node NCCL traffic needs its own rules (trusted network).";
    };

    apiKeyFile = mkOption {
      type = types.nullOr (types.strMatching "/.*");
      default = null;
      example = "/run/secrets/sglang-api-key";
      description = ''
        A file holding the API key clients must send (SGLang's `--api-key`). It is
        handed to the unit with systemd's `LoadCredential=` and read inside the
        process, so it never enters the Nix store or the command line. Give it as
        a string, not a Nix path (a path would be copied into the store).
      '';
    };

    environment = mkOption {
      type = types.attrsOf (types.nullOr types.str);
      default = { };
      example = { NCCL_DEBUG = "INFO"; };
      description = "Environment on top of the profile's variables (each with a reason there); null removes one.";
    };

    extraArgs = mkOption {
      type = types.listOf types.str;
      default = [ ];
      example = [ "--mem-fraction-static" "0.88" "--enable-metrics" ];
      description = ''
        Further SGLang arguments, appended after the module's flags: a flag given
        here wins (argparse keeps the last value) and nothing of the profile is
        dropped. Flags and choices the pinned SGLang does not accept are an
        evaluation error with a suggestion.
      '';
    };

    nnodes = mkOption {
      type = types.ints.positive;
      default = 1;
      description = "Number of nodes (`--nnodes`); with more than one, set `nodeRank` and `distInitAddr` on each.";
    };

    nodeRank = mkOption {
      type = types.ints.unsigned;
      default = 0;
      description = "This node's rank (`--node-rank`), 0 .. nnodes-1.";
    };

    distInitAddr = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "10.0.0.1:5000";
      description = "host:port of node 0 for the distributed init (`--dist-init-addr`), the same on every node.";
    };

    stateDir = mkOption {
      type = types.strMatching "/.*";
      default = "/var/lib/sglang";
      description = ''
        Writable state: the Hugging Face cache (`huggingface/`), triton and
        TorchInductor JIT caches (`triton/`, `inductor/`), flashinfer's and CUDA's
        caches. The default is a systemd StateDirectory owned by the dynamic user.
      '';
    };

    startTimeoutSec = mkOption {
      type = types.ints.positive;
      default = 7200;
      description = ''
        How long start-up (download, loading ~233 GB of weights over 8 GPUs, JIT
        compiles, CUDA graph capture) may take before systemd gives up (`TimeoutStartSec`).
      '';
    };

    readiness.intervalSec = mkOption {
      type = types.ints.positive;
      default = 5;
      description = "Seconds between `/health` probes of the readiness gate.";
    };

    ignoredRules = mkOption {
      type = types.listOf (types.enum (map (r: r.id) service.rules.rules));
      default = [ ];
      example = [ "sm120-fp4-gemm-cutlass-before-flashinfer-fix" ];
      description = "Rules whose errors become warnings (for a known-fixed runtime). Use sparingly.";
    };

    finalPackage = mkOption {
      type = types.package;
      readOnly = true;
      default = cfg.package;
      defaultText = literalExpression "config.services.sglang.package";
      description = "The Python environment the service runs (read-only).";
    };

    finalArgs = mkOption {
      type = types.listOf types.str;
      readOnly = true;
      default = rendered.argv;
      defaultText = literalExpression "(lib.sglangService.render { ... }).argv";
      description = "SGLang's argv as the service passes it (read-only): what `blackwell-stack serve render` prints.";
    };
  };

  config = lib.mkIf cfg.enable {
    assertions =
      map (v: { assertion = false; message = service.verdictText v; }) (lib.filter (v: !(ignored v)) rendered.errors)
      ++ [
        {
          assertion = cfg.nodeRank < cfg.nnodes;
          message = "services.sglang.nodeRank = ${toString cfg.nodeRank} must be below nnodes = ${toString cfg.nnodes}";
        }
        {
          assertion = !(lib.any (a: a == "--api-key" || lib.hasPrefix "--api-key=" a) cfg.extraArgs);
          message = "services.sglang.extraArgs: --api-key would put the key in the Nix store and on the command line; use services.sglang.apiKeyFile";
        }
      ];

    warnings =
      map service.verdictText rendered.warnings
      ++ map (v: "ignored by services.sglang.ignoredRules: " + service.verdictText v) (lib.filter ignored rendered.errors);

    networking.firewall.allowedTCPPorts = lib.mkIf cfg.openFirewall [ cfg.port ];

    systemd.services.sglang = {
      description = "SGLang serving ${cfg.profile.name or "a blackwell-stack profile"}";
      wantedBy = [ "multi-user.target" ];
      wants = [ "network-online.target" ];
      after = [ "network-online.target" ];

      environment = rendered.env // {
        HOME = cfg.stateDir;
        HF_HOME = "${cfg.stateDir}/huggingface";
        TRITON_CACHE_DIR = "${cfg.stateDir}/triton";
        TORCHINDUCTOR_CACHE_DIR = "${cfg.stateDir}/inductor";
        XDG_CACHE_HOME = "${cfg.stateDir}/cache";
        CUDA_CACHE_PATH = "${cfg.stateDir}/cuda";
      };

      serviceConfig = {
        # exec: the unit is "started" once the server process runs; the readiness
        # gate below then holds activation until /health answers.
        Type = "exec";
        ExecStart = utils.escapeSystemdExecArgs ([ python launcher ] ++ rendered.argv);
        # Ordering of ExecStartPost: the readiness gate first (mkBefore); checks
        # that need a ready server (sglang-smoke.nix) add theirs with mkAfter.
        ExecStartPost = lib.mkBefore [ "${readinessGate}" ];
        TimeoutStartSec = cfg.startTimeoutSec;
        Restart = "on-failure";
        RestartSec = 30;
        LoadCredential = lib.optional (cfg.apiKeyFile != null) "api-key:${cfg.apiKeyFile}";

        DynamicUser = true;
        StateDirectory = lib.mkIf stateDirIsDefault "sglang";
        StateDirectoryMode = "0700";
        ReadWritePaths = lib.optional (!stateDirIsDefault) cfg.stateDir;
        WorkingDirectory = cfg.stateDir;

        # Hardening as in nixpkgs' ollama module, adapted for a JIT workload:
        # triton, TorchInductor, flashinfer and the CUDA driver write and run
        # code at run time, so there is no MemoryDenyWriteExecute.
        DevicePolicy = "closed";
        DeviceAllow = [
          "char-nvidiactl"
          "char-nvidia-caps"
          "char-nvidia-frontend" # /dev/nvidia0..N
          "char-nvidia-uvm"
        ];
        PrivateDevices = false; # it would hide the GPUs
        CapabilityBoundingSet = [ "" ];
        NoNewPrivileges = true;
        LockPersonality = true;
        PrivateTmp = true;
        PrivateUsers = true;
        ProcSubset = "all"; # /proc/meminfo, /proc/cpuinfo (torch, psutil)
        ProtectProc = "invisible";
        ProtectClock = true;
        ProtectControlGroups = true;
        ProtectHome = true;
        ProtectHostname = true;
        ProtectKernelLogs = true;
        ProtectKernelModules = true;
        ProtectKernelTunables = true;
        ProtectSystem = "strict";
        RemoveIPC = true;
        RestrictNamespaces = true;
        RestrictRealtime = true;
        RestrictSUIDSGID = true;
        # AF_NETLINK: NCCL lists network interfaces (getifaddrs) for its bootstrap.
        RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" "AF_NETLINK" ];
        SystemCallArchitectures = "native";
        SystemCallFilter = [ "@system-service @resources" "~@privileged" ];
        UMask = "0077";
        # Pinned host memory for NCCL and CUDA transfers.
        LimitMEMLOCK = "infinity";
        LimitNOFILE = 65536;
      };
    };
  };
}
