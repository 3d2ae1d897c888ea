# services.sglang: SGLang serving a profile of modules/profiles/ on one of the
# locked serving stacks (services.sglang.stack; by default the stable stack's
# Qwen3.5-397B-A17B-NVFP4 on 8x RTX PRO 6000 Blackwell, SM120, PCIe).
#
# The argv is rendered by lib/sglang-service.nix (`render`), the same function
# the tests compare with `blackwell-stack serve render`; every rule of
# modules/rules.json becomes an assertion (errors) or a warning, and choices
# are enums taken from the profile's SGLang flag table (modules/sglang-flags/<version>.json).
#
# The module leaves the host's nixpkgs alone: it sets no nixpkgs.* and takes
# its packages from options (the flake's nixosModules.sglang sets them to the
# flake's own packages). Of pkgs it reads only addDriverRunpath.driverLink.
# docs/nixos-module.md explains each run-time setting with its upstream source.
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
  stacks = import ../lib/stacks.nix;
  # The flag table of the profile's SGLang (the assertions below hold the
  # package's SGLang to the profile's runtime).
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

  # What the stack's packages carry about themselves (the flake's sglang-env sets
  # passthru.blackwellStack = { stack; versions; cudaHome; cc; }); null for a
  # package from elsewhere.
  stack = if cfg.package == null then null else cfg.package.passthru.blackwellStack or null;
  stackVersions = if stack == null then null else stack.versions or null;

  # services.sglang.stack against the package and the profile (each with the fix in its message).
  packageStack = if stack == null then null else stack.stack or null;
  stackLocks = stacks.versions cfg.stack;
  profileName = cfg.profile.name or "(unnamed)";
  profileStacks = cfg.profile.stacks or null;
  # A profile names the stacks it is made for; one without that list must at
  # least be for the SGLang and flashinfer the stack locks.
  profileFitsStack =
    if profileStacks != null then
      builtins.elem cfg.stack profileStacks
    else
      builtins.all (c: (cfg.profile.runtime.${c} or null) == stackLocks.${c}) [ "sglang" "flashinfer" ];
  packageFitsStack = packageStack == null || packageStack == cfg.stack;
  profileIsFor =
    if profileStacks != null then
      "the stacks " + lib.concatStringsSep ", " profileStacks
    else
      "sglang ${toString (cfg.profile.runtime.sglang or "?")}, flashinfer ${toString (cfg.profile.runtime.flashinfer or "?")}";
  useAProfileOfTheStack = "a profile of the ${cfg.stack} stack: ${lib.concatStringsSep ", " (stacks.profiles cfg.stack)}";
  profileFix =
    if stacksForProfile != [ ] then
      ''Set services.sglang.stack = "${builtins.head stacksForProfile}", or use ${useAProfileOfTheStack}''
    else
      "Use ${useAProfileOfTheStack}";
  # The locked stacks this profile is made for, to name in the message.
  stacksForProfile =
    if profileStacks != null then
      builtins.filter (name: builtins.elem name stacks.lockedNames) profileStacks
    else
      builtins.filter (
        name: (stacks.versions name).sglang == (cfg.profile.runtime.sglang or null)
      ) stacks.lockedNames;

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

  ignored = v: builtins.elem v.id cfg.ignoredRules;

  # State: a StateDirectory= under /var/lib (systemd creates it and gives it to
  # the unit's user, dynamic or not); elsewhere a static user and a tmpfiles rule.
  dynamicUser = cfg.user == null;
  stateDirName = lib.removePrefix "/var/lib/" cfg.stateDir;
  stateDirUnderVarLib = lib.hasPrefix "/var/lib/" cfg.stateDir;
  # The state directory is made 0700 and given to the service user: never a
  # shared system directory (/srv, /var/lib itself), nothing ProtectHome hides.
  isUnder = dirs: path: lib.any (d: path == d || lib.hasPrefix "${d}/" path) dirs;
  hiddenDirs = [ "/home" "/root" "/run/user" ];
  stateDirIsOwn =
    lib.length (lib.filter (c: c != "") (lib.splitString "/" cfg.stateDir)) >= 2
    && !(builtins.elem cfg.stateDir [ "/var/lib" "/var/cache" "/var/log" "/var/tmp" ])
    && !(isUnder ([ "/nix" "/etc" "/usr" "/proc" "/sys" "/dev" ] ++ hiddenDirs) cfg.stateDir);

  isLoopbackHost = builtins.elem cfg.host [ "127.0.0.1" "::1" "localhost" ] || lib.hasPrefix "127." cfg.host;
  modelIsLocal = cfg.model.path != null || (cfg.finalEnvironment.HF_HUB_OFFLINE or null) == "1";

  # Blackwell (compute capability 10.0 and later) runs only on NVIDIA's open kernel modules.
  profileIsBlackwell = lib.versionAtLeast (cfg.profile.hardware.compute_capability or "0") "10.0";

  # Standalone scripts run by the SGLang environment's Python: the launcher
  # reads the keys from systemd credentials inside the process (see its
  # docstring); the readiness gate waits for /health.
  launcher = builtins.path {
    path = ../src/blackwell_stack/serve/launcher.py;
    name = "sglang-launcher.py";
  };
  readinessGate = builtins.path {
    path = ../src/blackwell_stack/serve/readiness.py;
    name = "sglang-readiness.py";
  };
  python = "${cfg.finalPackage}/bin/python3";

  # A server bound to every address is reached on loopback.
  connectHost =
    if cfg.host == "0.0.0.0" then
      "127.0.0.1"
    else if cfg.host == "::" then
      "::1"
    else
      cfg.host;
  healthUrl = "${cfg.serverUrl}/health";

  # A start (load, readiness gate, smoke test) ends within this budget, or
  # systemd stops it; the gates give up earlier with their reason.
  startBudgetSec = cfg.readiness.timeoutSec + cfg.smokeTest.budgetSec + 60;

  # What the unit needs at run time, each with the upstream code that reads it
  # (docs/nixos-module.md has the details). The profile's variables and
  # services.sglang.environment come on top.
  runtimeEnvironment =
    {
      HOME = cfg.stateDir;
      # huggingface_hub constants.py: the Hub cache lives under HF_HOME (default ~/.cache/huggingface).
      HF_HOME = "${cfg.stateDir}/huggingface";
      # triton knobs.py: TRITON_CACHE_DIR (default ~/.triton/cache).
      TRITON_CACHE_DIR = "${cfg.stateDir}/triton";
      # torch _inductor/runtime/cache_dir_utils.py: default /tmp/torchinductor_<user>, lost with PrivateTmp.
      TORCHINDUCTOR_CACHE_DIR = "${cfg.stateDir}/inductor";
      # flashinfer jit/env.py: JIT builds and cubins under $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer.
      FLASHINFER_WORKSPACE_BASE = cfg.stateDir;
      XDG_CACHE_HOME = "${cfg.stateDir}/cache";
      # The CUDA driver's PTX JIT cache (CUDA programming guide, environment variables).
      CUDA_CACHE_PATH = "${cfg.stateDir}/cuda";
      # triton backends/nvidia/driver.py libcuda_dirs(): without it, triton runs
      # /sbin/ldconfig -p, which NixOS does not have (NixOS/nixpkgs#426296).
      TRITON_LIBCUDA_PATH = "${pkgs.addDriverRunpath.driverLink}/lib";
    }
    // lib.optionalAttrs (cfg.runtime.cc != null) {
      # triton runtime/build.py: the launcher stub is compiled with $CC (else gcc or clang on PATH);
      # flashinfer jit/cpp_ext.py passes $CC to nvcc as -ccbin and links with $CXX (default c++).
      CC = "${cfg.runtime.cc}/bin/cc";
      CXX = "${cfg.runtime.cc}/bin/c++";
    }
    // lib.optionalAttrs (cfg.runtime.cudaHome != null) {
      # flashinfer jit/cpp_ext.py get_cuda_path(): $CUDA_HOME/bin/nvcc and its headers.
      CUDA_HOME = "${cfg.runtime.cudaHome}";
    };

  removedByUser = lib.filter (k: cfg.environment.${k} == null) (lib.attrNames cfg.environment);
in
{
  imports = [
    # services.sglang.smokeTest: its ExecStartPost comes after the readiness gate.
    ./sglang-smoke.nix
    (lib.mkRenamedOptionModule
      [ "services" "sglang" "startTimeoutSec" ]
      [ "services" "sglang" "readiness" "timeoutSec" ]
    )
  ];

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
        dropped. Flags and choices the pinned SGLang does not accept are an
        evaluation error with a suggestion; `--api-key` and `--admin-api-key` are
        refused in every spelling (use `apiKeyFile`, `adminApiKeyFile`).
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
          weights over 8 GPUs, JIT compiles, CUDA graph capture). Past it the readiness
          gate stops the unit with the reason in the journal, and it is not restarted.
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
        (`hardware.nvidia`) with the open kernel modules on Blackwell. The unit cannot
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

    serverUrl = mkOption {
      type = types.str;
      readOnly = true;
      internal = true;
      default = "http://${if lib.hasInfix ":" connectHost then "[${connectHost}]" else connectHost}:${toString cfg.port}";
      description = "Where the unit's gates reach the server (read-only).";
    };

    finalPackage = mkOption {
      type = types.nullOr types.package;
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

    finalEnvironment = mkOption {
      type = types.attrsOf types.str;
      readOnly = true;
      default = removeAttrs (runtimeEnvironment // rendered.env) removedByUser;
      defaultText = literalExpression "run-time variables // profile env // services.sglang.environment";
      description = "The unit's environment (read-only): the module's run-time variables, the profile's, then `environment`.";
    };
  };

  config = lib.mkIf cfg.enable {
    assertions =
      [
        {
          assertion = cfg.package != null;
          message = ''
            services.sglang.package is not set. Import blackwell-stack.nixosModules.sglang, which sets it to
            the flake's packages.<system>.sglang-env, or set it to a Python environment with SGLang.'';
        }
        {
          assertion = cfg.package == null || (cfg.runtime.cudaHome != null && cfg.runtime.cc != null);
          message = ''
            services.sglang.runtime.cudaHome and runtime.cc must be set: flashinfer's JIT needs a CUDA 13.0 toolkit
            (CUDA_HOME) and Triton a C compiler (CC) at run time, and services.sglang.package carries no
            passthru.blackwellStack to take them from (the flake's sglang-env does).'';
        }
      ]
      ++ [
        {
          assertion = packageFitsStack;
          message = ''
            services.sglang.package is the environment of the ${toString packageStack} stack, but services.sglang.stack = "${cfg.stack}":
            set services.sglang.stack = "${toString packageStack}" (with blackwell-stack.nixosModules.sglang the package then follows it),
            or leave services.sglang.package to the flake's module.'';
        }
        {
          assertion = profileFitsStack;
          message = ''
            services.sglang.profile ${profileName} is not made for services.sglang.stack = "${cfg.stack}" (sglang ${stackLocks.sglang},
            flashinfer ${stackLocks.flashinfer}); it is for ${profileIsFor}. ${profileFix}.'';
        }
      ]
      # With the package, the profile and the stack in agreement, the package must hold what the lock says.
      ++ lib.optionals (stackVersions != null && packageFitsStack && profileFitsStack) (
        map
          (component: {
            assertion = (stackVersions.${component} or null) == cfg.profile.runtime.${component};
            message = ''
              services.sglang.package has ${component} ${toString (stackVersions.${component} or "(unknown)")}, but the profile
              ${cfg.profile.name or ""} (and the rules checked against it) is for ${component} ${cfg.profile.runtime.${component}}:
              use the profile made for this stack, or the stack the profile names.'';
          })
          [ "sglang" "flashinfer" ]
      )
      ++ map (v: {
        assertion = false;
        message = service.verdictText v;
      }) (lib.filter (v: !(ignored v)) rendered.errors)
      ++ [
        {
          assertion = cfg.nodeRank < cfg.nnodes;
          message = "services.sglang.nodeRank = ${toString cfg.nodeRank} must be below nnodes = ${toString cfg.nnodes}";
        }
        {
          assertion = secretsOnCommandLine == [ ];
          message = ''
            services.sglang: ${lib.concatStringsSep ", " secretsOnCommandLine} (in extraArgs or the profile, in any spelling
            SGLang's parser accepts) would put the key in the Nix store and in /proc/PID/cmdline; give it as a file
            with services.sglang.apiKeyFile / adminApiKeyFile.'';
        }
        {
          assertion = !dynamicUser || stateDirUnderVarLib;
          message = ''
            services.sglang.stateDir = ${cfg.stateDir} is outside /var/lib, so the dynamic user cannot own it:
            set services.sglang.user (and group), or keep stateDir under /var/lib.'';
        }
        {
          assertion = dynamicUser || cfg.group != null;
          message = "services.sglang.group must be set when services.sglang.user is.";
        }
        {
          assertion = !cfg.loopbackOnly || (isLoopbackHost && cfg.nnodes == 1);
          message = ''
            services.sglang.loopbackOnly needs a loopback host and a single node (host = ${cfg.host},
            nnodes = ${toString cfg.nnodes}): clients and the other nodes would be cut off.'';
        }
        {
          assertion = stateDirIsOwn;
          message = ''
            services.sglang.stateDir = ${cfg.stateDir} must be a directory of its own, such as /var/lib/sglang or
            /srv/sglang: it is made 0700 for the service user, and /home, /root and /run/user are hidden from it.'';
        }
        {
          assertion = cfg.model.path == null || !(isUnder hiddenDirs cfg.model.path);
          message = "services.sglang.model.path = ${toString cfg.model.path} is hidden from the service by ProtectHome; keep the checkpoint under /srv or /var/lib.";
        }
        {
          assertion = !cfg.requireNvidiaDriver || config.hardware.nvidia.enabled;
          message = ''
            services.sglang needs the NVIDIA driver: set hardware.nvidia.datacenter.enable = true (headless) or
            services.xserver.videoDrivers = [ "nvidia" ], with hardware.nvidia.open = true.'';
        }
        {
          assertion = !(cfg.requireNvidiaDriver && profileIsBlackwell) || config.hardware.nvidia.open == true;
          message = ''
            services.sglang: the profile's GPUs (compute capability ${cfg.profile.hardware.compute_capability or "?"}) are
            Blackwell, which NVIDIA supports only with the open kernel modules: set hardware.nvidia.open = true.'';
        }
      ];

    warnings =
      map service.verdictText rendered.warnings
      ++ map (v: "ignored by services.sglang.ignoredRules: " + service.verdictText v) (lib.filter ignored rendered.errors)
      ++ lib.optional (cfg.package != null && stackVersions == null) ''
        services.sglang.package carries no passthru.blackwellStack.versions, so the rules cannot be checked against
        the SGLang and flashinfer it holds; they are checked against the profile's runtime instead.'';

    # The unit cannot load modules (ProtectKernelModules; NoNewPrivileges keeps
    # the setuid nvidia-modprobe that libcuda runs from gaining root), so CUDA's
    # /dev/nvidia-uvm must exist before it starts.
    boot.kernelModules = lib.mkIf cfg.requireNvidiaDriver [
      "nvidia"
      "nvidia_uvm"
    ];

    networking.firewall.allowedTCPPorts = lib.mkIf cfg.openFirewall [ cfg.port ];

    users = lib.mkIf (!dynamicUser) {
      users.${cfg.user} = {
        isSystemUser = true;
        group = cfg.group;
        home = cfg.stateDir;
        description = "SGLang service";
      };
      groups.${cfg.group} = { };
    };

    systemd.tmpfiles.rules = lib.optional (
      !dynamicUser && !stateDirUnderVarLib
    ) "d ${cfg.stateDir} 0700 ${cfg.user} ${cfg.group} - -";

    systemd.services.sglang = {
      description = "SGLang serving ${cfg.profile.name or "a blackwell-stack profile"}";
      wantedBy = [ "multi-user.target" ];
      wants = [ "network-online.target" ];
      after = [ "network-online.target" ];

      # ninja (flashinfer's JIT runs it from PATH), nvcc for JIT builds that look
      # for it on PATH, and the compiler.
      path = [
        cfg.finalPackage
      ]
      ++ lib.optional (cfg.runtime.cudaHome != null) cfg.runtime.cudaHome
      ++ lib.optional (cfg.runtime.cc != null) cfg.runtime.cc;
      environment = cfg.finalEnvironment;

      # A start that fails the same way every time (a crash while loading) is
      # tried `burst` times, then the unit stays failed: every failed start ends
      # within startBudgetSec + RestartSec, so `burst` of them fit in the interval.
      unitConfig = {
        StartLimitBurst = cfg.restart.burst;
        StartLimitIntervalSec = cfg.restart.burst * (startBudgetSec + cfg.restart.delaySec);
      };

      serviceConfig =
        {
          # exec: the unit is "started" once the server process runs; the readiness
          # gate then holds activation until /health answers.
          Type = "exec";
          ExecStart = utils.escapeSystemdExecArgs ([ python launcher ] ++ rendered.argv);
          # Ordering of ExecStartPost: the readiness gate first (mkBefore); checks
          # that need a ready server (sglang-smoke.nix) add theirs with mkAfter.
          ExecStartPost = lib.mkBefore [
            (utils.escapeSystemdExecArgs [
              python
              readinessGate
              "--url"
              healthUrl
              "--timeout"
              cfg.readiness.timeoutSec
              "--interval"
              cfg.readiness.intervalSec
            ])
          ];
          TimeoutStartSec = startBudgetSec;
          # A gate that fails (no /health in time, garbage answers) or a clean exit
          # with an error is not retried: it would fail the same way, after
          # reloading the weights. Crashes (signals: SGLang SIGKILLs its own process
          # tree when a worker dies, engine.py) restart, bounded by the start limit.
          Restart = "on-abnormal";
          RestartSec = cfg.restart.delaySec;
          LoadCredential =
            lib.optional (cfg.apiKeyFile != null) "api-key:${cfg.apiKeyFile}"
            ++ lib.optional (cfg.adminApiKeyFile != null) "admin-api-key:${cfg.adminApiKeyFile}";

          DynamicUser = dynamicUser;
          StateDirectory = lib.mkIf stateDirUnderVarLib stateDirName;
          StateDirectoryMode = "0700";
          ReadWritePaths = lib.optional (!stateDirUnderVarLib) cfg.stateDir;
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
          PrivateMounts = true;
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
          RestrictAddressFamilies = [
            "AF_INET"
            "AF_INET6"
            "AF_UNIX"
            "AF_NETLINK"
          ];
          SystemCallArchitectures = "native";
          SystemCallFilter = [
            "@system-service @resources"
            "~@privileged"
          ];
          UMask = "0077";
          # Pinned host memory for NCCL and CUDA transfers.
          LimitMEMLOCK = "infinity";
          LimitNOFILE = 65536;
        }
        // lib.optionalAttrs (!dynamicUser) {
          User = cfg.user;
          Group = cfg.group;
        }
        // lib.optionalAttrs cfg.loopbackOnly {
          IPAddressDeny = "any";
          IPAddressAllow = "localhost";
        };
    };
  };
}
