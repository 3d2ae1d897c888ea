# services.sglang's consistency checks: the package, the profile and the stack
# agree; no key on the command line; state, user, network and driver settings
# that cannot work are refused with the option to change. The rules of
# modules/rules.json are checked when the system is built (check.nix).
{
  config,
  lib,
  ...
}:
let
  cfg = config.services.sglang;
  stacks = import ../../lib/stacks.nix;
  inherit (import ./common.nix { inherit cfg lib; }) stack dynamicUser stateDirUnderVarLib isLoopbackHost;
  inherit (cfg.rendered) secretsOnCommandLine;

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

  # The state directory is made 0700 and given to the service user: never a
  # shared system directory (/srv, /var/lib itself), nothing ProtectHome hides.
  isUnder = dirs: path: lib.any (d: path == d || lib.hasPrefix "${d}/" path) dirs;
  hiddenDirs = [ "/home" "/root" "/run/user" ];
  stateDirIsOwn =
    lib.length (lib.filter (c: c != "") (lib.splitString "/" cfg.stateDir)) >= 2
    && !(builtins.elem cfg.stateDir [ "/var/lib" "/var/cache" "/var/log" "/var/tmp" ])
    && !(isUnder ([ "/nix" "/etc" "/usr" "/proc" "/sys" "/dev" ] ++ hiddenDirs) cfg.stateDir);

  # Blackwell (compute capability 10.0 and later) runs only on NVIDIA's open kernel modules.
  profileIsBlackwell = lib.versionAtLeast (cfg.profile.hardware.compute_capability or "0") "10.0";
in
{
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
          # The unit finds the driver's libraries through /run/opengl-driver/lib (TRITON_LIBCUDA_PATH, the
          # RUNPATH of every CUDA library in the environment), which nixos/modules/hardware/graphics.nix
          # makes only with hardware.graphics.enable; the NVIDIA module alone does not make it.
          assertion = !cfg.requireNvidiaDriver || config.hardware.graphics.enable;
          message = ''
            services.sglang needs the driver link /run/opengl-driver, which NixOS makes only with
            hardware.graphics.enable = true (the environment finds libcuda.so.1 there): set it.'';
        }
        {
          assertion = !(cfg.requireNvidiaDriver && profileIsBlackwell) || config.hardware.nvidia.open == true;
          message = ''
            services.sglang: the profile's GPUs (compute capability ${cfg.profile.hardware.compute_capability or "?"}) are
            Blackwell, which NVIDIA supports only with the open kernel modules: set hardware.nvidia.open = true.'';
        }
      ];

    # The rules' errors and warnings come from the build-time check (check.nix).
    warnings =
      lib.optional (cfg.package != null && stackVersions == null) ''
        services.sglang.package carries no passthru.blackwellStack.versions, so the rules cannot be checked against
        the SGLang and flashinfer it holds; they are checked against the profile's runtime instead.'';
  };
}
