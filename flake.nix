{
  description = "blackwell-stack: SGLang serving Qwen3.5-397B-A17B-NVFP4 on 8x RTX PRO 6000 Blackwell (SM120) with CUDA 13: serving stacks locked by uv and built from the same lock by uv2nix, sgl-kernel 0.3.21 built from source against each stack's torch";

  inputs = {
    # nixos-unstable of 2026-03-03; cudaPackages_13_0 is CUDA 13.0.x there.
    # From it the stacks take only stdenv, python312, the CUDA 13.0 toolchain
    # (kernel build, CUDA_HOME for JIT), zlib, autoPatchelf and the driver
    # link: no Python package (docs/stacks.md).
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

    # nixpkgs' lib/ alone, mirrored per nixpkgs commit (the mirror of
    # 2026-03-01, before the nixpkgs lock): what tests evaluate uv2nix and
    # pyproject.nix with, without nixpkgs.
    nixpkgs-lib.url = "github:nix-community/nixpkgs.lib";

    # uv.lock -> Nix: the last commits at or before the nixpkgs lock's date
    # (nix/flake-inputs.json); one nixpkgs and one pyproject.nix for all three.
    pyproject-nix = {
      url = "github:pyproject-nix/pyproject.nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    uv2nix = {
      url = "github:pyproject-nix/uv2nix";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
    build-system-pkgs = {
      url = "github:pyproject-nix/build-system-pkgs";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.uv2nix.follows = "uv2nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
  };

  outputs =
    {
      self,
      nixpkgs,
      nixpkgs-lib,
      pyproject-nix,
      uv2nix,
      build-system-pkgs,
    }:
    let
      inherit (nixpkgs-lib) lib;

      # The target: x86_64-linux hosts with SM120 GPUs.
      systems = [ "x86_64-linux" ];

      stackLib = import ./lib;
      inherit (stackLib) stacks;

      pkgsFor = lib.genAttrs systems (
        system:
        import nixpkgs {
          inherit system;
          # Unfree is allowed for NVIDIA's CUDA redistributables only (nix/nixpkgs-config.json).
          config = stackLib.nixpkgsConfig;
        }
      );

      # One Python package set per stack (nix/stack-sets.nix); a stack without
      # a lock throws, when used, with the command that makes it.
      setsFor = lib.genAttrs systems (
        system:
        import ./nix/stack-sets.nix {
          inherit pyproject-nix uv2nix build-system-pkgs;
          pkgs = pkgsFor.${system};
        }
      );

      # f pkgs sets, for each system.
      forAllSystems = f: lib.genAttrs systems (system: f pkgsFor.${system} setsFor.${system});

      # `sglang-env` for the default stack, `sglang-env-<name>` for the others.
      inherit (stacks) envName;

      # Environments of locked stacks (stacks.lockedNames) are packages (built and
      # checked); a stack without a lock is only a legacyPackages attribute,
      # which throws with the command that makes the lock when built (`nix
      # flake check` skips it).
      unlockedNames = builtins.filter (name: !stacks.isLocked name) stacks.names;

      # A Nix older than nixpkgs needs (its lib/minfeatures.nix) stops every
      # output built from nixpkgs with one message (lib/nix-floor.nix), before
      # anything else of nixpkgs is read; the builtins-only `lib` and the module
      # (which builds nothing itself) stay.
      nixFloor = import ./lib/nix-floor.nix {
        inherit (import "${nixpkgs}/lib/minfeatures.nix") missing;
        nixVersion = builtins.nixVersion or "older than 2.0";
      };
    in
    nixFloor.guard { except = [ "lib" "nixosModules" ]; } {
      lib = stackLib;

      # The stacks' Python package sets, for extending with `.overrideScope`.
      legacyPackages = forAllSystems (
        pkgs: sets:
        {
          pythonSets = sets;

          # NixOS VM tests, as nixpkgs keeps them (legacyPackages.<system>.nixosTests),
          # out of `checks`: they need a builder with KVM (docs/nixos-module.md),
          # and `nix flake check` builds no legacyPackages (nix's src/nix/flake.cc
          # checks only their system names).
          #   nix build .#nixosTests.sglang -L
          nixosTests.sglang = import ./modules/tests/sglang-vm.nix {
            # services.sglang in VMs with stand-in servers, on a plain nixpkgs.
            pkgs = nixpkgs.legacyPackages.${pkgs.stdenv.hostPlatform.system};
            inherit (self.packages.${pkgs.stdenv.hostPlatform.system}) blackwell-stack;
          };

          # Checks on the GPU host (nix/gpu-checks.nix): they require the
          # "cuda" system feature (services.sglang.gpuChecks.enable), which
          # `nix flake check` on any other builder would refuse, so they are
          # not in `checks`.
          #   nix build .#gpuChecks.sgl-kernel -L
          gpuChecks = import ./nix/gpu-checks.nix {
            inherit pkgs sets;
            packages = self.packages.${pkgs.stdenv.hostPlatform.system};
          };
        }
        // lib.genAttrs' unlockedNames (name: lib.nameValuePair (envName name) sets.${name}.blackwellStackEnv)
      );

      # The environments, sgl-kernel and its wheel, CUDA_HOME and the CLI (nix/packages.nix).
      packages = forAllSystems (pkgs: sets: import ./nix/packages.nix { inherit pkgs sets; });

      # The same packages in a nixpkgs package set (overlays/): `default` adds
      # this flake's own, pinned derivations; `host-nixpkgs` builds them from
      # the package set it is applied to (not the pinned configuration);
      # `cuda-13-0` makes CUDA 13.0 the set's default cudaPackages (opt in).
      overlays = {
        default = import ./overlays {
          packagesFor =
            system:
            self.packages.${system}
              or (throw "blackwell-stack: this flake builds for ${builtins.concatStringsSep ", " systems}, not ${system}");
        };
        host-nixpkgs = import ./overlays/host-nixpkgs.nix { inherit pyproject-nix uv2nix build-system-pkgs; };
        cuda-13-0 = import ./overlays/cuda-13-0.nix;
      };

      apps = forAllSystems (
        pkgs: _sets:
        let
          cli = {
            type = "app";
            program = lib.getExe self.packages.${pkgs.stdenv.hostPlatform.system}.blackwell-stack;
            meta.description = "blackwell-stack CLI: plan, stack, pins, kernel, serve, doctor, verify";
          };
        in
        {
          blackwell-stack = cli;
          default = cli;
        }
      );

      devShells = forAllSystems (
        pkgs: sets: {
          default = import ./nix/dev-shell.nix {
            inherit pkgs;
            pythonSet = sets.${stacks.default};
          };
        }
      );

      # What any x86_64-linux builder can build: no KVM, no GPU (nix/checks.nix);
      # the VM test is legacyPackages.<system>.nixosTests.sglang.
      checks = forAllSystems (
        pkgs: sets:
        import ./nix/checks.nix {
          inherit pkgs sets;
          packages = self.packages.${pkgs.stdenv.hostPlatform.system};
        }
      );

      formatter = forAllSystems (pkgs: _sets: pkgs.nixfmt-tree);

      nixosModules = {
        # services.sglang on the environment of services.sglang.stack (the
        # default stack's unless set). It sets no nixpkgs.config and no
        # overlays: the environments are built with this flake's own nixpkgs,
        # whatever the host's nixpkgs is.
        sglang = import ./modules/flake-module.nix { packagesFor = system: self.packages.${system}; };
        default = self.nixosModules.sglang;
      };
    };
}
