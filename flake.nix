{
  description = "blackwell-stack: SGLang serving Qwen3.5-397B-A17B-NVFP4 on 8x RTX PRO 6000 Blackwell (SM120) with CUDA 13.0, PyTorch nightly 2.12.0.dev20260307+cu130 and sgl-kernel 0.3.21 built from source, pinned bit for bit";

  inputs = {
    # nixos-unstable of 2026-03-03, the week of the pinned torch nightly;
    # cudaPackages_13 is 13.0.x there. Locked in flake.lock to
    # 8c809a146a140c5c8806f13399592dbcb1bb5dc4.
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

    # Used as plain source, not as a flake: its flake would lock its own
    # nixpkgs, flake-utils, treefmt-nix, nix-github-actions and systems; its
    # default.nix takes our pkgs instead.
    poetry2nix = {
      url = "github:nix-community/poetry2nix";
      flake = false;
    };
  };

  outputs =
    {
      self,
      nixpkgs,
      poetry2nix,
    }:
    let
      inherit (nixpkgs) lib;

      # The target: x86_64-linux hosts with SM120 GPUs.
      systems = [ "x86_64-linux" ];

      stackLib = import ./lib;

      pkgsFor = lib.genAttrs systems (
        system:
        import nixpkgs {
          inherit system;
          config = stackLib.nixpkgsConfig;
          overlays = [ self.overlays.default ];
        }
      );

      forAllSystems = f: lib.genAttrs systems (system: f pkgsFor.${system});
    in
    {
      lib = stackLib;

      overlays = {
        default = import ./overlays { inherit poetry2nix; };
        cuda13 = import ./overlays/cuda13.nix;
        torch-nightly = import ./overlays/torch-nightly.nix;
        stack-packages = import ./overlays/stack-packages.nix { inherit poetry2nix; };
      };

      packages = forAllSystems (
        pkgs:
        let
          python3Packages = pkgs.python312Packages;
        in
        rec {
          inherit (python3Packages)
            torch
            triton
            sgl-kernel
            sglang
            ;
          # The built wheel (buildPythonPackage's `dist` output), for pip users.
          sgl-kernel-wheel = python3Packages.sgl-kernel.dist;
          sglang-env = pkgs.python312.withPackages (ps: [ ps.sglang ]);
          blackwell-stack = pkgs.blackwell-stack;
          default = sgl-kernel-wheel;
        }
      );

      apps = forAllSystems (
        pkgs:
        let
          cli = {
            type = "app";
            program = lib.getExe pkgs.blackwell-stack;
            meta.description = "blackwell-stack CLI: plan, pins, kernel, serve, doctor, verify";
          };
        in
        {
          blackwell-stack = cli;
          default = cli;
        }
      );

      devShells = forAllSystems (pkgs: {
        default = pkgs.callPackage ./nix/dev-shell.nix { inherit poetry2nix; };
      });

      checks = forAllSystems (
        pkgs:
        pkgs.callPackage ./nix/checks.nix { }
        // {
          # services.sglang in NixOS VMs with stand-in servers, on a plain nixpkgs (needs KVM).
          sglang-vm = import ./modules/tests/sglang-vm.nix {
            pkgs = nixpkgs.legacyPackages.${pkgs.stdenv.hostPlatform.system};
            inherit (self.packages.${pkgs.stdenv.hostPlatform.system}) blackwell-stack;
          };
        }
      );

      formatter = forAllSystems (pkgs: pkgs.nixfmt-tree);

      nixosModules = {
        # services.sglang, with the stack's packages and nixpkgs config. If you
        # set your own nixpkgs.config.allowUnfreePredicate, OR it with
        # blackwell-stack.lib.nixpkgsConfig.allowUnfreePredicate: the two are
        # not merged (the later definition wins).
        sglang = {
          imports = [ ./modules/sglang.nix ];
          nixpkgs.overlays = [ self.overlays.default ];
          nixpkgs.config = {
            inherit (stackLib.nixpkgsConfig)
              cudaSupport
              cudaCapabilities
              cudaForwardCompat
              allowUnfreePredicate
              ;
          };
        };
        default = self.nixosModules.sglang;
      };
    };
}
