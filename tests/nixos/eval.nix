# Evaluates modules/sglang.nix as NixOS would: the real nixpkgs lib's
# evalModules, the stand-in option declarations of ./options.nix, and the
# module arguments NixOS passes (pkgs, utils) reduced to what the module may
# use. Returns the parts of the configuration the tests look at, as JSON data.
#
#   libPath:  nixpkgs.lib's lib/ (the locked revision, narHash-checked by the test)
#   config:   a NixOS module (the host's configuration under test)
{ libPath, config }:
let
  lib = import libPath;

  # Of pkgs the module may read addDriverRunpath.driverLink only (nixpkgs
  # pkgs/build-support/add-driver-runpath: "/run/opengl-driver" on x86_64);
  # touching anything else fails the evaluation.
  pkgs = {
    addDriverRunpath.driverLink = "/run/opengl-driver";
  };

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

  evaluated = lib.evalModules {
    modules = [
      ./options.nix
      ../../modules/sglang.nix
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
  kernelModules = cfg.boot.kernelModules;
  allowedTCPPorts = cfg.networking.firewall.allowedTCPPorts;
  users = lib.mapAttrs (_: u: { inherit (u) isSystemUser group home; }) cfg.users.users;
  groups = lib.attrNames cfg.users.groups;
  tmpfiles = cfg.systemd.tmpfiles.rules;
  final =
    if built then
      {
        # `or null`: the same harness also reads a module from before these options.
        finalArgs = cfg.services.sglang.finalArgs or null;
        finalEnvironment = cfg.services.sglang.finalEnvironment or null;
        loopbackOnly = cfg.services.sglang.loopbackOnly or null;
      }
    else
      null;
}
