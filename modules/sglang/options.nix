# services.sglang's options: the stack, the package, the profile, a typed option
# per SGLang flag that matters on SM120 (its choices the flag table's), the
# service's address, keys, state, nodes, readiness and restart policy. The
# module's read-only results (final*) are declared in unit.nix.
{
  config,
  lib,
  ...
}:
let
  inherit (lib) mkOption types literalExpression;

  cfg = config.services.sglang;
  service = import ../../lib/sglang-service.nix;
  stacks = import ../../lib/stacks.nix;
  inherit (import ./common.nix { inherit cfg lib; }) stack isLoopbackHost;
  # The flag table of the profile's SGLang (assertions.nix holds the package's
  # SGLang to the profile's runtime).
  table = service.flagTableFor cfg.profile.runtime.sglang;

  # A flag's choices in that SGLang, as an option type.
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

  secretsOnCommandLine = service.secretFlagsIn { inherit rendered table; };

  # The profile's and the user's environment (rendered.env), not finalEnvironment: the run-time
  # variables the unit adds depend on loopbackOnly, whose default this is, and none of them is this one.
  modelIsLocal = cfg.model.path != null || (rendered.env.HF_HUB_OFFLINE or null) == "1";
in
{
  options.services.sglang = {
    enable = lib.mkEnableOption "SGLang serving the blackwell-stack profile (Qwen3.5-397B-A17B-NVFP4 on SM120 by default)";

    stack = mkOption {
      type = types.enum stacks.lockedNames;
      default = stacks.default;
      defaultText = literalExpression ''"${stacks.default}"'';
      example = "current";
      description = ''
        The serving stack (`stacks/<name>/` of blackwell-stack, one uv lock each; the
        choices are the stacks with a lock). It chooses the environment (the flake's
        `nixosModules.sglang` sets `package` to the flake's `sglang-env` for the default
        stack, `sglang-env-<name>` for another) and the default `profile` (the first one the
        stack lists). `stable`: SGLang 0.5.9 on torch 2.12.1, as the seed deployment ran;
        `current`: SGLang 0.5.23 as released, with the prebuilt sglang-kernel 0.4.10. A
        `package` or `profile` of another stack is refused.
      '';
    };

    package = mkOption {
      type = types.nullOr types.package;
      default = null;
      example = literalExpression "blackwell-stack.packages.x86_64-linux.sglang-env-current";
      description = ''
        A Python environment with SGLang; its `bin/python3` runs `sglang.launch_server`.
        The flake's `nixosModules.sglang` sets it to the environment of `stack` (the flake's
        `packages.<system>.sglang-env`, or `sglang-env-<stack>`), built from the stack's own
        package set, so importing the module rebuilds nothing else on the host. Its
        `passthru.blackwellStack` gives `runtime.cudaHome`, `runtime.cc`, the stack's name
        and the versions the rules are checked against.
      '';
    };

    runtime = {
      cudaHome = mkOption {
        type = types.nullOr types.path;
        default = if stack == null then null else stack.cudaHome or null;
        defaultText = literalExpression "config.services.sglang.package.passthru.blackwellStack.cudaHome";
        description = ''
          CUDA 13.0 toolkit tree (`bin/nvcc`, `include` with cudart and CCCL, `lib`) for
          flashinfer's JIT compiler (`CUDA_HOME`). Set it only for a `package` that does
          not carry `passthru.blackwellStack`.
        '';
      };
      cc = mkOption {
        type = types.nullOr types.package;
        default = if stack == null then null else stack.cc or null;
        defaultText = literalExpression "config.services.sglang.package.passthru.blackwellStack.cc";
        description = ''
          C/C++ compiler (`bin/cc`, `bin/c++`): Triton compiles its launcher stub with `CC`
          at run time, flashinfer's JIT hands `CC` to nvcc as host compiler and links with
          `CXX`. Set it only for a `package` that does not carry `passthru.blackwellStack`.
        '';
      };
    };

    profile = mkOption {
      type = types.attrs;
      default = service.loadProfile (builtins.head (stacks.profiles cfg.stack));
      defaultText = literalExpression "lib.importJSON ./profiles/<the first profile of stacks/<stack>/stack.json>.json";
      example = literalExpression "lib.importJSON \"\${blackwell-stack}/modules/profiles/qwen3.5-397b-a17b-nvfp4-v2-sm120-current.json\"";
      description = ''
        The serving profile (model, hardware, flags, environment; see
        `modules/profiles/`), by default the first one `stack` lists. It must be made for
        `stack` (its `stacks` list, or else its runtime versions). The typed options below
        default to its values, their choices are its SGLang's flags, and the rules check
        the flags against its hardware.
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
          `model.id`/`model.revision` are not used. The service's user must be able
          to read it (with the default dynamic user: world-readable), and it must not be
          under /home, /root or /run/user, which `ProtectHome` hides.
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

    fp4GemmBackend = profileFlagOption "--fp4-gemm-backend" {
      type = choicesOf "--fp4-gemm-backend";
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

    disableCustomAllReduce = profileFlagOption "--disable-custom-all-reduce" {
      type = types.bool;
      example = true;
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

    loopbackOnly = mkOption {
      type = types.bool;
      default = isLoopbackHost && cfg.nnodes == 1 && modelIsLocal;
      defaultText = literalExpression ''
        host is a loopback address && nnodes == 1
          && (model.path != null || environment.HF_HUB_OFFLINE == "1")
      '';
      description = ''
        Let the unit reach loopback addresses only (`IPAddressDeny=any`,
        `IPAddressAllow=localhost`). On by default when nothing needs the network: a
        loopback `host`, one node, and a local checkpoint (`model.path`) or
        `HF_HUB_OFFLINE=1`. The first start from the Hub downloads the checkpoint, so it
        stays off then; turn it on once the checkpoint is in the cache and
        `environment.HF_HUB_OFFLINE = "1"` is set.
      '';
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

    adminApiKeyFile = mkOption {
      type = types.nullOr (types.strMatching "/.*");
      default = null;
      example = "/run/secrets/sglang-admin-api-key";
      description = ''
        A file holding the key of SGLang's administrative endpoints (`--admin-api-key`),
        handed over like `apiKeyFile`. With it set, SGLang requires the admin key, not
        the API key, on those endpoints (srt/utils/auth.py).
      '';
    };

    environment = mkOption {
      type = types.attrsOf (types.nullOr types.str);
      default = { };
      example = {
        NCCL_DEBUG = "INFO";
        HF_HUB_OFFLINE = "1";
      };
      description = ''
        Environment on top of the profile's variables (each with a reason there) and
        the module's run-time variables (`finalEnvironment`); null removes one.
      '';
    };

    extraArgs = mkOption {
      type = types.listOf types.str;
      default = [ ];
      example = [
        "--mem-fraction-static"
        "0.88"
        "--enable-metrics"
      ];
      description = ''
        Further SGLang arguments, appended after the module's flags: a flag given
        here wins (argparse keeps the last value) and nothing of the profile is
        dropped. Flags and choices the pinned SGLang does not accept are refused
        when the system is built (the configuration's check, with a suggestion);
        `--api-key` and `--admin-api-key` are refused at evaluation in every
        spelling (use `apiKeyFile`, `adminApiKeyFile`).
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

    user = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "sglang";
      description = ''
        User the service runs as. Null runs it as a transient `DynamicUser`, which
        owns only a state directory under /var/lib. Set it (the user and `group` are
        created) to own a `stateDir` elsewhere, or to share a checkpoint directory
        with a group.
      '';
    };

    group = mkOption {
      type = types.nullOr types.str;
      default = cfg.user;
      defaultText = literalExpression "config.services.sglang.user";
      example = "sglang";
      description = "Group of the service when `user` is set (created with it).";
    };

    stateDir = mkOption {
      type = types.strMatching "/(.*[^/])?";
      default = "/var/lib/sglang";
      example = "/srv/sglang";
      description = ''
        Writable state: the Hugging Face cache (`huggingface/`), the Triton,
        TorchInductor, flashinfer and CUDA JIT caches. Under /var/lib it is the unit's
        `StateDirectory=`, owned by its user (dynamic or not); anywhere else it needs a
        static `user`, and a tmpfiles rule creates it owned by that user.
      '';
    };

    readiness = {
      timeoutSec = mkOption {
        type = types.ints.positive;
        default = 7200;
        description = ''
          How long the server may take to answer `/health` (download, loading the
          weights over 8 GPUs, JIT compiles, CUDA graph capture). A first start on a
          host also compiles SGLang's own JIT kernels as they are first used (the KV
          cache store, rope and qk-norm took 17, 64 and 24 s on 16 cores) and, without
          flashinfer-cubin, flashinfer's modules: minutes more than a later start.
          Past it the readiness gate stops the unit with the reason in the journal, and
          it is not restarted.
        '';
      };
      intervalSec = mkOption {
        type = types.ints.positive;
        default = 5;
        description = "Seconds between `/health` probes of the readiness gate.";
      };
    };

    restart = {
      burst = mkOption {
        type = types.ints.positive;
        default = 3;
        description = ''
          Starts allowed (the first one included) within `StartLimitIntervalSec`, which
          the module sets to `burst` x (the whole start budget + `restart.delaySec`) so
          that a server crashing during every start is stopped after `burst` attempts
          (`StartLimitBurst`), as is one crashing `burst` times within that interval.
          Only crashes restart (`Restart=on-abnormal`: a signal, a start timeout, a
          watchdog); a clean non-zero exit or a failed gate does not.
        '';
      };
      delaySec = mkOption {
        type = types.ints.unsigned;
        default = 30;
        description = "Seconds between a crash and the restart (`RestartSec`).";
      };
    };

    requireNvidiaDriver = mkOption {
      type = types.bool;
      default = true;
      description = ''
        Load `nvidia` and `nvidia_uvm` at boot and require the NVIDIA driver
        (`hardware.nvidia`) with the open kernel modules on Blackwell, and the driver link
        `/run/opengl-driver` (`hardware.graphics.enable`). The unit cannot
        load kernel modules itself (`ProtectKernelModules`; `NoNewPrivileges` keeps the
        setuid nvidia-modprobe from gaining root). Turn it off only to run a stand-in server without a GPU, as
        the VM test does.
      '';
    };

    ignoredRules = mkOption {
      type = types.listOf (types.enum (map (r: r.id) service.rules.rules));
      default = [ ];
      example = [ "sm120-fp4-gemm-cutlass-before-flashinfer-fix" ];
      description = "Rules whose errors become warnings (for a known-fixed runtime). Use sparingly.";
    };


    rendered = mkOption {
      type = types.raw;
      readOnly = true;
      internal = true;
      visible = false;
      default = rendered // { inherit secretsOnCommandLine overrides; };
      description = ''
        lib/sglang-service.nix's render of this configuration (argv, environment, verdicts) and the
        secret flags it carries, evaluated once for the module's own files (assertions.nix, unit.nix).
      '';
    };
  };
}
