# services.sglang.gpuChecks: lets this host's Nix build the flake's GPU checks
# (nix/gpu-checks.nix, `nix build .#gpuChecks.sgl-kernel`), which require the
# "cuda" system feature. nixpkgs' nix-required-mounts does it
# (nixos/modules/programs/nix-required-mounts.nix, read at the lock): its
# pre-build-hook mounts the driver link and /dev/nvidia* into the sandbox of a
# derivation that requires one of the preset's features, and the preset adds
# those features ("gpu" "nvidia-gpu" "opengl" "cuda") to
# nix.settings.system-features, beside the defaults (nixos/modules/config/nix.nix
# sets its defaults at the same priority, so the lists merge).
# Independent of services.sglang.enable: a build host need not serve.
{ config, lib, ... }:
let
  cfg = config.services.sglang.gpuChecks;
in
{
  options.services.sglang.gpuChecks.enable = lib.mkOption {
    type = lib.types.bool;
    default = false;
    example = true;
    description = ''
      Let this host's Nix build derivations that need the GPU: the flake's
      `gpuChecks` (`nix build .#gpuChecks.sgl-kernel -L`: the kernel's import
      and `blackwell-stack kernel test --smoke`). Turns on
      `programs.nix-required-mounts` with its `nvidia-gpu` preset, which
      gives the Nix daemon the `cuda` system feature and mounts the NVIDIA
      driver and devices into the sandbox of such derivations only. Needs the
      NVIDIA driver (`hardware.nvidia`).
    '';
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = config.hardware.nvidia.enabled;
        message = "services.sglang.gpuChecks.enable needs the NVIDIA driver, which the GPU checks run on: set hardware.nvidia.datacenter.enable = true (or services.xserver.videoDrivers = [ \"nvidia\" ]).";
      }
    ];
    programs.nix-required-mounts = {
      enable = true;
      presets.nvidia-gpu.enable = true;
    };
  };
}
