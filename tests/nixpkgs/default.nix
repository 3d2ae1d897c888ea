# A stand-in for nixpkgs, so that tests can evaluate this flake's own
# outputs (packages, checks, overlays, legacyPackages) where nixpkgs cannot
# be had: it needs Nix >= 2.18 and a 4 GB download (tests/support/flake_eval.py).
# The flake's code, uv2nix, pyproject.nix and build-system-pkgs run for real
# on it; of nixpkgs itself only what they call is here, as recorders:
#
#   - a derivation is an attribute set of its arguments, with `type =
#     "derivation"`, an outPath made from its name and the package set's
#     `label` (also its `recordedIn`), one attribute per output,
#     `overrideAttrs`, and passthru merged in, as stdenv.mkDerivation
#     returns it. Nothing is built, and its inputs do not go into the path:
#     two derivations are the same here when they have the same name and
#     come from the same package set.
#   - the builders (runCommand, symlinkJoin, mkShell, fetchers, setup hooks,
#     buildPythonApplication, runNixOSTest) are derivations of their
#     arguments.
#   - overlays are applied as nixpkgs applies them: a fixed point of the
#     base set extended by each overlay in turn (lib.extends).
#
# Values that are facts about nixpkgs at the lock (8c809a14, 2026-03-03)
# say where they were read; the rest only need to be of the right kind.
#
#   import ./. { system = "x86_64-linux"; config = { }; overlays = [ ]; label = "host"; }
#
# lib/ is nixpkgs.lib's, copied beside this file by the test (the locked
# nixpkgs-lib input).
{
  system,
  config ? { },
  overlays ? [ ],
  # Which package set this is; it is in every recorded outPath.
  label ? "nixpkgs",
}:
let
  lib = import ./lib;
  platform = lib.systems.elaborate system;

  storePath =
    name:
    let
      # Nix's store path alphabet has no e, o, u or t.
      digest = builtins.replaceStrings [ "e" ] [ "z" ] (
        builtins.substring 0 32 (builtins.hashString "sha256" "${label}/${name}")
      );
    in
    "/nix/store/${digest}-${name}";

  # stdenv.mkDerivation: attributes or a function of the final attributes
  # (finalAttrs, with finalPackage), overrideAttrs, outputs, passthru.
  mkDerivation =
    fnOrAttrs:
    let
      attrsOf = final: if builtins.isFunction fnOrAttrs then fnOrAttrs final else fnOrAttrs;
      finalAttrs = attrsOf finalAttrs // {
        finalPackage = package;
      };
      attrs = attrsOf finalAttrs;
      name = attrs.name or "${attrs.pname}-${attrs.version}";
      outputs = attrs.outputs or [ "out" ];
      passthru = attrs.passthru or { };
      output =
        outputName:
        package
        // {
          outPath = storePath (name + lib.optionalString (outputName != "out") "-${outputName}");
          inherit outputName;
        };
      package =
        builtins.removeAttrs attrs [ "passthru" ]
        // passthru
        // {
          type = "derivation";
          inherit name outputs passthru;
          # Not nixpkgs': which package set recorded it, for the tests to read.
          recordedIn = label;
          outputName = "out";
          outPath = storePath name;
          drvPath = storePath "${name}.drv";
          meta = attrs.meta or { };
          overrideAttrs =
            f:
            mkDerivation (
              final:
              let
                old = attrsOf final;
              in
              old // f old
            );
        }
        // lib.genAttrs outputs output;
    in
    package;

  recorded = name: extra: mkDerivation ({ inherit name; } // extra);

  # lib.makeScope's overrideScope (pkgs/top-level/cuda-packages.nix makes each
  # cudaPackages_X_Y with lib.makeScope).
  scope = base: base // { overrideScope = g: scope (lib.fix (self: base // g self base)); };

  # A CUDA package set: the parts of cudaPackages_X_Y the flake names.
  cudaPackagesFor =
    version:
    let
      # buildRedist's brokenAssertions: without config.cudaSupport every CUDA
      # redistributable is meta.broken, and check-meta refuses to evaluate it.
      broken = name: throw "Package ‘cuda${version}-${name}’ in pkgs/development/cuda-modules/packages/${name}.nix is marked as broken, refusing to evaluate.";
      redist =
        name: outputs:
        let
          drv = recorded "${name}-${version}" { inherit outputs; };
        in
        if config.cudaSupport or false then drv else drv // { outPath = broken name; drvPath = broken name; };
    in
    scope {
      cudaMajorMinorVersion = version;
      backendStdenv = stdenv // {
        cc = recorded "gcc-wrapper-for-cuda-${version}" { };
      };
      cuda_nvcc = redist "cuda_nvcc" [ "out" ];
      cuda_crt = redist "cuda_crt" [ "out" ];
      cuda_cudart = redist "cuda_cudart" [
        "out"
        "stubs"
      ];
      cuda_cccl = redist "cuda_cccl" [ "out" ];
      cuda_nvrtc = redist "cuda_nvrtc" [ "out" ];
      libcublas = redist "libcublas" [ "out" ];
      libcurand = redist "libcurand" [ "out" ];
      libcusolver = redist "libcusolver" [ "out" ];
      libcusparse = redist "libcusparse" [ "out" ];
      cuda_nvtx = redist "cuda_nvtx" [ "out" ];
    };

  stdenv = {
    inherit mkDerivation;
    hostPlatform = platform;
    buildPlatform = platform;
    targetPlatform = platform;
    inherit (platform) isLinux isDarwin;
    cc = recorded "gcc-wrapper" { } // {
      # The interpreter's glibc, as pyproject.nix reads it for manylinux tags;
      # glibc 2.40 or 2.42 at the lock (tests/test_stacks_nix.py).
      libc = {
        pname = "glibc";
        version = "2.40";
        linuxHeaders.version = "6.12";
      };
    };
  };

  # CPython 3.12 as pyproject.nix reads it (python312 at the lock is 3.12.x;
  # tests/test_stacks_nix.py).
  python312 = mkDerivation {
    pname = "python3";
    version = "3.12.12";
    passthru = {
      pythonVersion = "3.12";
      sitePackages = "lib/python3.12/site-packages";
      interpreter = "${storePath "python3-3.12.12"}/bin/python3.12";
      implementation = "cpython";
      sourceVersion = {
        major = "3";
        minor = "12";
        patch = "12";
        suffix = "";
      };
      pythonOnBuildForHost = python312;
      pkgs = python312Packages;
      withPackages = _: recorded "python3-3.12.12-env" { };
      inherit stdenv;
    };
  };

  python312Packages = {
    buildPythonApplication = attrs: mkDerivation attrs;
    flit-core = recorded "flit-core" { };
    packaging = recorded "packaging" { };
    # What nix/gpu-checks.nix puts beside a stack's environment for upstream's kernel tests.
    pytest = recorded "pytest" { };
    pluggy = recorded "pluggy" { };
    iniconfig = recorded "iniconfig" { };
  };

  base =
    final:
    {
      inherit lib stdenv config;
      inherit python312 python312Packages;
      pkgs = final;
      callPackage = lib.callPackageWith final;
      newScope = extra: lib.callPackageWith (final // extra);

      buildPackages = final;
      runtimeShell = "/bin/sh";

      runCommand = name: env: buildCommand: mkDerivation (env // { inherit name buildCommand; });
      symlinkJoin = args: mkDerivation args;
      mkShell = args: mkDerivation ({ name = "nix-shell"; } // args);
      writeShellScriptBin =
        name: text:
        recorded name {
          inherit text;
          meta.mainProgram = name;
        };
      makeSetupHook = args: script: recorded (args.name or "hook") { inherit script; };
      replaceVars = src: replacements: recorded (baseNameOf src) { inherit replacements; };
      fetchurl = args: recorded (args.name or (baseNameOf args.url)) { fetchurl = args; };
      fetchFromGitHub = args: recorded (args.name or "source") { fetchFromGitHub = args; };
      fetchzip = args: recorded (args.name or "source") { fetchzip = args; };

      autoPatchelfHook = recorded "auto-patchelf-hook" { };
      autoAddDriverRunpath = recorded "auto-add-driver-runpath-hook" { };
      # pkgs/build-support/add-driver-runpath: "/run/opengl-driver" on x86_64-linux.
      addDriverRunpath.driverLink = "/run/opengl-driver";
      pythonManylinuxPackages = {
        manylinux1 = [ ];
        manylinux2010 = [ ];
        manylinux2014 = [ ];
      };
      unzip = recorded "unzip" { };
      zlib = recorded "zlib" { };
      ugrep = recorded "ugrep" { };
      # A version of nixpkgs' cmake (pkgs/by-name/cm/cmake/package.nix once
      # had 3.31.3); the flake's cmake-version check compares it with 3.31.
      cmake = recorded "cmake-3.31.3" { version = "3.31.3"; };
      ninja = recorded "ninja" { };
      numactl = recorded "numactl" { };
      nixfmt-tree = recorded "nixfmt-tree" { };
      python3 = python312;

      # Some CUDA 12 release stands in for the default CUDA (nixpkgs' default
      # cudaPackages is CUDA 12 at the lock); cudaPackages_13_0 is CUDA 13.0.
      cudaPackages = cudaPackagesFor "12.9";
      cudaPackages_13_0 = cudaPackagesFor "13.0";

      # nixos/lib/testing/run.nix: a NixOS test's derivation requires the
      # "nixos-test" system feature, and "kvm" on Linux (still at the lock:
      # NixOS/nixpkgs#524345 of 2026-05-26 proposes to drop "kvm").
      testers.runNixOSTest =
        test:
        recorded "vm-test-run-${test.name}" {
          requiredSystemFeatures = [
            "nixos-test"
          ]
          ++ lib.optionals platform.isLinux [ "kvm" ];
          passthru.test = test;
        };
    };
in
lib.fix (lib.foldl' (set: overlay: lib.extends overlay set) base overlays)
