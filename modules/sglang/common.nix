# What more than one file of services.sglang derives from its options
# (imported by options.nix, assertions.nix and unit.nix; cheap to evaluate).
{ cfg, lib }:
{
  # What the stack's packages carry about themselves (the flake's sglang-env sets
  # passthru.blackwellStack = { stack; versions; cudaHome; cc; }); null for a
  # package from elsewhere.
  stack = if cfg.package == null then null else cfg.package.passthru.blackwellStack or null;

  # State: a StateDirectory= under /var/lib (systemd creates it and gives it to
  # the unit's user, dynamic or not); elsewhere a static user and a tmpfiles rule.
  dynamicUser = cfg.user == null;
  stateDirName = lib.removePrefix "/var/lib/" cfg.stateDir;
  stateDirUnderVarLib = lib.hasPrefix "/var/lib/" cfg.stateDir;

  isLoopbackHost = builtins.elem cfg.host [ "127.0.0.1" "::1" "localhost" ] || lib.hasPrefix "127." cfg.host;
}
