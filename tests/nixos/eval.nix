# Evaluates modules/sglang.nix as NixOS would: the real nixpkgs lib's
# evalModules, the stand-in option declarations of ./options.nix, and the
# module arguments NixOS passes (pkgs, utils) reduced to what the module may
# use. Returns the parts of the configuration the tests look at, as JSON data.
#
#   libPath:  nixpkgs.lib's lib/ (the locked revision, narHash-checked by the test)
#   config:   a NixOS module (the host's configuration under test)
#   flake:    null: modules/sglang.nix alone. Else the flake's nixosModules.sglang
#             (modules/flake-module.nix) with stand-ins of the flake's packages at
#             the given paths: { envPath = stack: path; cudaHome; cc; cli; }
{
  libPath,
  config,
  flake ? null,
}:
let
  lib = import libPath;
  stacks = import ../../lib/stacks.nix;

  # Of pkgs the module may read addDriverRunpath.driverLink (nixpkgs
  # pkgs/build-support/add-driver-runpath: "/run/opengl-driver" on x86_64) and
  # runCommand (its build-time check), and the flake's module the host's
  # system, to pick the flake's packages; touching anything else fails the
  # evaluation.
  pkgs = {
    addDriverRunpath.driverLink = "/run/opengl-driver";
    # nixpkgs' runCommand (pkgs/build-support/trivial-builders: name, the derivation's attributes, its
    # script), for the configuration's build-time check: recorded, not built; the tests run its check.
    # Its path changes with its inputs (the CLI package among them), as a derivation's output path does.
    runCommand =
      name: drvAttrs: buildCommand:
      let
        inputs = builtins.hashString "sha256" (builtins.toJSON { inherit name drvAttrs buildCommand; });
      in
      standIn.package name "/nix/store/${builtins.substring 0 32 inputs}-${name}" { inherit drvAttrs buildCommand; };
  }
  // lib.optionalAttrs (flake != null) { stdenv.hostPlatform.system = "x86_64-linux"; };

  # NixOS' utils.escapeSystemdExecArgs (nixos/lib/utils.nix): each argument
  # as a JSON string, % and $ doubled so systemd expands no specifier or
  # variable in it, arguments joined by spaces.
  utils = {
    escapeSystemdExecArgs = lib.concatMapStringsSep " " (
      arg:
      lib.replaceStrings [ "%" "$" ] [ "%%" "$$" ] (
        builtins.toJSON (if builtins.isInt arg then toString arg else "${arg}")
      )
    );
  };

  # A package as the module sees one: a derivation with an output path.
  standIn.package =
    name: outPath: extra:
    {
      type = "derivation";
      inherit name outPath;
      meta = { };
    }
    // extra;

  # The flake's packages as nix/stack-env.nix makes them: one environment per
  # locked stack (lib/stacks.nix envName), carrying passthru.blackwellStack with
  # the versions of the real lock; and the CLI.
  flakePackages =
    lib.listToAttrs (
      map (
        name:
        lib.nameValuePair (stacks.envName name) (
          standIn.package (stacks.envName name) (flake.envPath name) {
            passthru.blackwellStack = {
              stack = name;
              versions = stacks.versions name;
              cudaHome = standIn.package "cuda-13.0" flake.cudaHome { };
              cc = standIn.package "gcc-wrapper" flake.cc { };
            };
          }
        )
      ) stacks.lockedNames
    )
    // {
      blackwell-stack = standIn.package "blackwell-stack" flake.cli { };
    };

  module =
    if flake == null then
      ../../modules/sglang.nix
    else
      import ../../modules/flake-module.nix {
        packagesFor = system: if system == "x86_64-linux" then flakePackages else throw "no packages for ${system}";
      };

  evaluated = lib.evalModules {
    modules = [
      ./options.nix
      module
      config
      {
        _module.args = {
          inherit pkgs utils standIn;
        };
      }
    ];
  };
  cfg = evaluated.config;
  failed = map (a: a.message) (lib.filter (a: !a.assertion) cfg.assertions);
  # As NixOS' system.build.toplevel: the unit is only built when no assertion fails.
  built = failed == [ ];
in
{
  failedAssertions = failed;
  warnings = cfg.warnings;
  nixpkgsDefinitions = map (d: d.file) evaluated.options.nixpkgs.definitionsWithLocations;
  unit = if built then cfg.systemd.services.sglang or null else null;
  # What the build-time check (modules/sglang/check.nix) is run on.
  checked =
    if built && cfg.services.sglang ? checkedConfig then
      { inherit (cfg.services.sglang.checkedConfig) drvAttrs buildCommand; }
    else
      null;
  # The system's build-time checks (built with it, in no file of it): their output paths.
  systemChecks = map (c: c.outPath) cfg.system.checks;
  kernelModules = cfg.boot.kernelModules;
  requiredMounts = {
    inherit (cfg.programs.nix-required-mounts) enable;
    nvidiaGpu = cfg.programs.nix-required-mounts.presets.nvidia-gpu.enable;
  };
  allowedTCPPorts = cfg.networking.firewall.allowedTCPPorts;
  users = lib.mapAttrs (_: u: { inherit (u) isSystemUser group home; }) cfg.users.users;
  groups = lib.attrNames cfg.users.groups;
  tmpfiles = cfg.systemd.tmpfiles.rules;
  final =
    if built then
      {
        # `or null`: the same harness also reads a module from before these options.
        finalArgs = cfg.services.sglang.finalArgs or null;
        stack = cfg.services.sglang.stack or null;
        profile = cfg.services.sglang.profile.name or null;
        finalEnvironment = cfg.services.sglang.finalEnvironment or null;
        loopbackOnly = cfg.services.sglang.loopbackOnly or null;
      }
    else
      null;
}
