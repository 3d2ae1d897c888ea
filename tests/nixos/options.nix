# Stand-in declarations of the NixOS options services.sglang sets or reads,
# typed as NixOS types them, so that the real nixpkgs lib's evalModules can
# evaluate modules/sglang.nix without nixpkgs. Each names the NixOS file that
# declares the real option (nixpkgs at the locked revision). Only what the
# module touches is declared: anything else it set would be an evaluation
# error ("The option ... does not exist"), which is part of what the tests check.
{ lib, config, ... }:
let
  inherit (lib) mkOption types;

  # nixos/lib/systemd-unit-options.nix `unitOption`: list values of repeated
  # definitions are concatenated (ExecStartPost from two modules), others must agree.
  unitOption = lib.mkOptionType {
    name = "systemd option";
    merge =
      loc: defs:
      let
        defs' = lib.filterOverrides defs;
      in
      if lib.any (def: lib.isList def.value) defs' then
        lib.concatMap (def: lib.toList def.value) defs'
      else
        lib.mergeEqualOption loc defs';
  };

  # nixos/lib/systemd-unit-options.nix `checkService`: Type and Restart take known values only.
  serviceConfigType = types.addCheck (types.attrsOf unitOption) (
    attrs:
    (!(attrs ? Type) || lib.elem attrs.Type [ "exec" "simple" "forking" "oneshot" "dbus" "notify" "notify-reload" "idle" ])
    && (!(attrs ? Restart) || lib.elem attrs.Restart [ "no" "on-success" "on-failure" "on-abnormal" "on-abort" "always" ])
  );

  # nixos/lib/systemd-lib.nix `unitNameType`.
  unitName = types.strMatching "[a-zA-Z0-9@%:_.\\-]+[.](service|socket|device|mount|automount|swap|target|path|timer|scope|slice)";

  # nixos/lib/systemd-unit-options.nix: the parts of a service unit the module uses.
  serviceOptions = {
    description = mkOption {
      type = types.singleLineStr;
      default = "";
    };
    wantedBy = mkOption {
      type = types.listOf unitName;
      default = [ ];
    };
    wants = mkOption {
      type = types.listOf unitName;
      default = [ ];
    };
    after = mkOption {
      type = types.listOf unitName;
      default = [ ];
    };
    unitConfig = mkOption {
      type = types.attrsOf unitOption;
      default = { };
    };
    serviceConfig = mkOption {
      type = serviceConfigType;
      default = { };
    };
    environment = mkOption {
      type = types.attrsOf (
        types.nullOr (
          types.oneOf [
            types.str
            types.path
            types.package
          ]
        )
      );
      default = { };
    };
    path = mkOption {
      type = types.listOf (
        types.oneOf [
          types.package
          types.str
        ]
      );
      default = [ ];
    };
  };

  # nixos/modules/config/users-groups.nix userOpts / groupOpts (the fields the module sets).
  userOptions =
    { name, ... }:
    {
      options = {
        name = mkOption {
          type = types.passwdEntry types.str;
          default = name;
        };
        isSystemUser = mkOption {
          type = types.bool;
          default = false;
        };
        isNormalUser = mkOption {
          type = types.bool;
          default = false;
        };
        group = mkOption {
          type = types.str;
          default = "";
        };
        home = mkOption {
          type = types.passwdEntry types.path;
          default = "/var/empty";
        };
        description = mkOption {
          type = types.passwdEntry types.str;
          default = "";
        };
      };
    };
  groupOptions =
    { name, ... }:
    {
      options.name = mkOption {
        type = types.passwdEntry types.str;
        default = name;
      };
    };
in
{
  options = {
    # nixos/modules/misc/assertions.nix
    assertions = mkOption {
      type = types.listOf types.unspecified;
      default = [ ];
    };
    warnings = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };

    # nixos/modules/system/activation/top-level.nix: built with the system (its
    # builder's `passedChecks`), in no file of it.
    system.checks = mkOption {
      type = types.listOf types.package;
      default = [ ];
    };

    # nixos/modules/programs/nix-required-mounts.nix (lib.mkEnableOption both).
    programs.nix-required-mounts = {
      enable = mkOption {
        type = types.bool;
        default = false;
      };
      presets.nvidia-gpu.enable = mkOption {
        type = types.bool;
        default = false;
      };
    };

    # nixos/modules/system/boot/kernel.nix
    boot.kernelModules = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };

    # nixos/modules/services/networking/firewall.nix
    networking.firewall.allowedTCPPorts = mkOption {
      type = types.listOf types.port;
      default = [ ];
    };

    # nixos/modules/config/users-groups.nix
    users.users = mkOption {
      type = types.attrsOf (types.submodule userOptions);
      default = { };
    };
    users.groups = mkOption {
      type = types.attrsOf (types.submodule groupOptions);
      default = { };
    };

    # nixos/modules/system/boot/systemd.nix, systemd/tmpfiles.nix
    systemd.services = mkOption {
      type = types.attrsOf (types.submodule { options = serviceOptions; });
      default = { };
    };
    systemd.tmpfiles.rules = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };

    # nixos/modules/hardware/video/nvidia.nix: `enabled` is read-only, true when
    # the driver is configured (X11 video driver or the data-center driver).
    hardware.nvidia = {
      enabled = mkOption {
        type = types.bool;
        readOnly = true;
        default =
          config.hardware.nvidia.datacenter.enable || lib.elem "nvidia" config.services.xserver.videoDrivers;
      };
      datacenter.enable = mkOption {
        type = types.bool;
        default = false;
      };
      open = mkOption {
        type = types.nullOr types.bool;
        default = null;
      };
      # The driver package (nvidiaPackages.dc with datacenter.enable, else
      # .stable); pkgs/os-specific/linux/nvidia-x11/generic.nix puts
      # nvidia-smi in its `bin` output.
      package = mkOption {
        type = types.package;
        default = {
          type = "derivation";
          name = "nvidia-x11-580.95.05";
          outPath = "/nix/store/00000000000000000000000000000001-nvidia-x11-580.95.05";
          outputs = [ "out" "bin" ];
          bin = {
            type = "derivation";
            name = "nvidia-x11-580.95.05-bin";
            outPath = "/nix/store/00000000000000000000000000000002-nvidia-x11-580.95.05-bin";
          };
        };
      };
    };
    # nixos/modules/hardware/graphics.nix: /run/opengl-driver (the driver
    # link) is made only when this is on.
    hardware.graphics.enable = mkOption {
      type = types.bool;
      default = false;
    };
    # nixos/modules/services/x11/xserver.nix
    services.xserver.videoDrivers = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };

    # nixos/modules/misc/nixpkgs.nix: declared so that a definition would be
    # seen (the tests require that the module makes none).
    # No default, so a definition is the only thing that could show up.
    nixpkgs = mkOption {
      type = types.attrsOf types.anything;
    };
  };
}
