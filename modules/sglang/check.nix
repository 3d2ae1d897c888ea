# services.sglang's build-time check: the configuration the module rendered,
# held to the rules by the project's own checker (`blackwell-stack serve check
# --module-config`), as nixpkgs' prometheus module runs `promtool check config`.
# The rules, the flag tables and the versions are decided there alone
# (src/blackwell_stack/serve/module_check.py); here the module only renders. The
# check is one of `system.checks` (nixpkgs nixos/modules/system/activation/
# top-level.nix: built with the system, in no file of it), so a refused
# configuration fails `nixos-rebuild` with the checker's messages, each naming
# the option to change, and the checker's own render of the argv must be the
# module's. It is no restart trigger of the unit: its path changes with every
# change to the CLI package, and a restart reloads the model's weights when
# nothing the unit runs has changed.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  cfg = config.services.sglang;
  inherit (cfg) rendered;
  checked = pkgs.runCommand "sglang-config-checked" {
    nativeBuildInputs = [ cfg.checkPackage ];
    passAsFile = [ "profile" "moduleConfig" ];
    profile = builtins.toJSON cfg.profile;
    moduleConfig = builtins.toJSON {
      inherit (rendered) overrides argv;
      inherit (cfg) extraArgs ignoredRules;
      env = cfg.environment;
    };
  } ''
    blackwell-stack serve check --profile "$profilePath" --module-config "$moduleConfigPath"
    cp "$moduleConfigPath" "$out"
  '';
in
{
  options.services.sglang = {
    checkPackage = lib.mkOption {
      type = lib.types.nullOr lib.types.package;
      default = null;
      example = lib.literalExpression "blackwell-stack.packages.x86_64-linux.blackwell-stack";
      description = ''
        The blackwell-stack CLI that checks the configuration when the system is
        built (`serve check --module-config`). The flake's nixosModules.sglang sets
        it to the flake's `packages.<system>.blackwell-stack`.
      '';
    };
    checkedConfig = lib.mkOption {
      type = lib.types.package;
      readOnly = true;
      internal = true;
      visible = false;
      default = checked;
      description = "The build-time check of this configuration; one of the system's `system.checks`.";
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = cfg.checkPackage != null;
        message = ''
          services.sglang.checkPackage is not set: import blackwell-stack.nixosModules.sglang (which sets it
          to the flake's packages.<system>.blackwell-stack), or set it to the blackwell-stack CLI.'';
      }
    ];
    system.checks = lib.optional (cfg.checkPackage != null) cfg.checkedConfig;
  };
}
