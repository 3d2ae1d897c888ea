# services.sglang's unit: the read-only results (serverUrl, final*), what the
# unit needs at run time, and the systemd service with its gates and sandbox,
# kernel modules, firewall, user and state directory.
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
  inherit (import ./common.nix { inherit cfg lib; }) dynamicUser stateDirName stateDirUnderVarLib;
  inherit (cfg) rendered;

  # Standalone scripts run by the SGLang environment's Python: the launcher
  # reads the keys from systemd credentials inside the process (see its
  # docstring); the readiness gate waits for /health.
  launcher = builtins.path {
    path = ../../src/blackwell_stack/serve/launcher.py;
    name = "sglang-launcher.py";
  };
  readinessGate = builtins.path {
    path = ../../src/blackwell_stack/serve/readiness.py;
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
    }
    // lib.optionalAttrs cfg.loopbackOnly {
      # The unit may reach loopback addresses only (IPAddressAllow=localhost), but NCCL's bootstrap and
      # Gloo's CPU groups pick another interface first: NCCL takes "ib", then any interface but docker, lo
      # and virbr, and lo last (ncclFindInterfaces, src/misc/socket.cc); Gloo the address the host name
      # resolves to (torch's GlooDeviceFactory makeDefaultDevice). Told lo, both stay on 127.0.0.1
      # (benchmarks/loopback-gloo: without it Gloo's connect is refused and the other rank hangs).
      NCCL_SOCKET_IFNAME = "lo";
      GLOO_SOCKET_IFNAME = "lo";
    };

  removedByUser = lib.filter (k: cfg.environment.${k} == null) (lib.attrNames cfg.environment);
in
{
  options.services.sglang = {
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
      # for it on PATH, the compiler, and the driver's nvidia-smi: SGLang 0.5.9
      # reads the GPUs' memory with it at start (server_args.py line 730,
      # get_nvgpu_memory_capacity in srt/utils/common.py) and stops with
      # "nvidia-smi not found" without it; 0.5.23 falls back to torch
      # (sgl-project/sglang#18957).
      path = [
        cfg.finalPackage
      ]
      ++ lib.optional (cfg.runtime.cudaHome != null) cfg.runtime.cudaHome
      ++ lib.optional (cfg.runtime.cc != null) cfg.runtime.cc
      ++ lib.optional config.hardware.nvidia.enabled (lib.getBin config.hardware.nvidia.package);
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
