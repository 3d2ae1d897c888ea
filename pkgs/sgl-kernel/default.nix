# sgl-kernel 0.3.21 from source: the sgl-kernel/ directory of sglang v0.5.9,
# the patches of ../../patches/sgl-kernel, the recipe of ./recipe.json
# (default: SM120 only, FP4 on, FA3 off) and CUDA 13 from cudaPackages.
#
# Data, not code, lives next to this file:
#   ./sources.json  the sglang tree and every FetchContent dependency, with
#                   hashes and where they came from (../../lib/kernel-sources.nix)
#   ./recipe.json   CMake defines and environment (../../lib/kernel-recipe.nix)
#
# Modelled on nixpkgs' pkgs/development/python-modules/sglang-kernel/default.nix
# (b84c6bb3); differences: every dependency comes from sources.json (none
# hand-typed here), FETCHCONTENT_FULLY_DISCONNECTED=ON so that CMake downloads
# nothing while it configures, architectures come from the recipe, the wheel is an output
# (`dist`, `passthru.wheel`), and the GPU test is a separate derivation.
#
# Outputs: `out` (the installed package, `nix build .#sgl-kernel`) and `dist`
# (the wheel, `nix build .#sgl-kernel-wheel`): buildPythonPackage adds `dist`
# for pyproject builds (mk-python-derivation.nix, withDistOutput).
{
  lib,
  autoAddDriverRunpath,
  buildPythonPackage,
  fetchFromGitHub,
  fetchzip,
  runCommand,

  # build-system
  cmake,
  ninja,
  scikit-build-core,

  cudaPackages,
  numactl,
  python,
  torch,

  # The recipe as data; override to build for other GPUs or with another
  # measured per-job memory peak (recipe.memory.per_nvcc_thread_peak_mib).
  sglKernelRecipe ? lib.importJSON ./recipe.json,
}:
let
  sources = lib.importJSON ./sources.json;
  kernelSources = import ../../lib/kernel-sources.nix;

  # The recipe renders to CMake flags and environment through builtins-only
  # functions (the same ones tests compare with `blackwell-stack kernel recipe`):
  #   cmakeFlags  -> [ "-DSGL_KERNEL_CUDA_ARCHS=12.0a" "-DSGL_KERNEL_ENABLE_FP4=ON" ... ]
  #   environment -> { TORCH_CUDA_ARCH_LIST = "12.0a"; }
  recipe = sglKernelRecipe;
  recipeFile = builtins.toFile "sgl-kernel-recipe.json" (builtins.toJSON recipe);
  kernelRecipe = import ../../lib/kernel-recipe.nix;
  recipeFlags = kernelRecipe.cmakeFlags { inherit recipe; };
  recipeEnvironment = kernelRecipe.environment { inherit recipe; };

  # Architectures the recipe asks for ([ ] = upstream's hard-coded list);
  # patch 0005 configures FlashMLA only for its own architectures, so its
  # sources are fetched only then.
  cudaArchs = kernelSources.cudaArchsFromFlags recipeFlags;

  sglangPin = kernelSources.sglang sources;

  fetchDependency =
    dep:
    if dep.fetcher == "fetchzip" then
      fetchzip (dep.args // { name = "${dep.name}-source"; })
    else
      fetchFromGitHub (dep.args // { name = "${dep.name}-source"; });

  dependencies = map (
    name:
    let
      dep = kernelSources.dependency sources name;
    in
    dep
    // {
      src = fetchDependency dep;
      submoduleSrcs = map (sub: {
        inherit (sub) path;
        src = fetchFromGitHub (sub.args // { name = "${name}-${baseNameOf sub.path}-source"; });
      }) dep.submodules;
    }
  ) (kernelSources.neededNames sources cudaArchs);

  writableDependencies = builtins.filter (dep: dep.writable) dependencies;

  # Each dependency is passed in place of its FetchContent download.
  # Store paths are read-only, so dependencies that CMake edits in place
  # (flashmla.cmake rewrites FlashMLA headers with CUDA 13) or that need
  # submodules put inside them are copied into the build directory first.
  writableCopies = lib.concatMapStrings (dep: ''
    cp -r --no-preserve=mode ${dep.src} "$NIX_BUILD_TOP/fetchcontent/${dep.name}"
    ${lib.concatMapStrings (sub: ''
      rm -rf "$NIX_BUILD_TOP/fetchcontent/${dep.name}/${sub.path}"
      cp -r --no-preserve=mode ${sub.src} "$NIX_BUILD_TOP/fetchcontent/${dep.name}/${sub.path}"
    '') dep.submoduleSrcs}
  '') writableDependencies;

  # Where each dependency lies in the build (its store path, or the writable
  # copy above; $NIX_BUILD_TOP is expanded by the shell). One function turns
  # that into the FETCHCONTENT_* settings (FULLY_DISCONNECTED=ON: nothing is
  # downloaded) and the prefix maps, here and in `blackwell-stack kernel
  # build --sources` (lib/kernel-sources.nix, compared with the Python side).
  dependencyDirs = lib.listToAttrs (map (dep: lib.nameValuePair dep.name
    (if dep.writable then "$NIX_BUILD_TOP/fetchcontent/${dep.name}" else "${dep.src}")) dependencies);
  fetchContentFlags = lib.mapAttrsToList (name: value: "-D${name}=${value}")
    (kernelSources.fetchContentSettings sources cudaArchs dependencyDirs);

  # No build directory or source store path in the wheel: __FILE__ and
  # similar strings are rewritten to short names.
  prefixMaps = kernelSources.prefixMaps sources cudaArchs dependencyDirs;

  cmakeFlags =
    recipeFlags
    ++ [
      # nixpkgs' sglang-kernel passes it too: find_package(Torch) does not
      # always set CUDA_VERSION, which the CMakeLists compares everywhere.
      (lib.cmakeFeature "CUDA_VERSION" cudaPackages.cudaMajorMinorVersion)
      # mscclpp's Python bindings are the only users of its nanobind and
      # dlpack FetchContent downloads; sgl-kernel links mscclpp_static only.
      (lib.cmakeBool "MSCCLPP_BUILD_PYTHON_BINDINGS" false)
      (lib.cmakeBool "MSCCLPP_BUILD_TESTS" false)
    ];

  package = buildPythonPackage.override { stdenv = cudaPackages.backendStdenv; } {
    # torch here is the pinned nightly wheel (torch-bin), which carries no
    # CUDA stdenv of its own; cudaPackages.backendStdenv is the host
    # compiler nvcc supports, what nixpkgs' source torch and xformers use
    # (pkgs/development/python-modules/xformers/default.nix: effectiveStdenv).
    pname = "sgl-kernel";
    version = sources.sglang.sgl_kernel_version;
    pyproject = true;

    src = fetchFromGitHub {
      inherit (sglangPin) owner repo rev hash;
    };
    sourceRoot = "source/sgl-kernel";

    # Sorted: 0001 ... 0005, applied with -p1 inside sourceRoot.
    patches = map (name: ../../patches/sgl-kernel + "/${name}") (
      builtins.sort builtins.lessThan (
        builtins.filter (lib.hasSuffix ".patch") (
          builtins.attrNames (builtins.readDir ../../patches/sgl-kernel)
        )
      )
    );

    nativeBuildInputs = [
      # libcuda.so.1 comes from the host's driver (/run/opengl-driver/lib),
      # as for torch-bin (pkgs/development/python-modules/torch/bin/default.nix).
      autoAddDriverRunpath
      cudaPackages.cuda_nvcc
    ];

    build-system = [
      cmake
      ninja
      scikit-build-core
    ];

    buildInputs = [
      cudaPackages.cuda_cccl # cuda/atomic, cub, thrust (un-nested from include/cccl in nixpkgs)
      cudaPackages.cuda_cudart
      cudaPackages.cuda_nvrtc # deep_gemm_cpp links nvrtc
      cudaPackages.libcublas # cublas_v2.h, -lcublas -lcublasLt
      cudaPackages.libcurand # curand.h
      cudaPackages.libcusolver # cusolver_common.h
      cudaPackages.libcusparse # cusparse.h
      numactl # mscclpp: find_package(NUMA REQUIRED)
      torch
    ];

    # scikit-build-core runs CMake itself (with the flags below).
    dontUseCmakeConfigure = true;

    # Passed through cmakeFlagsArray, which scikit-build-core's setup hook
    # (pkgs/development/python-modules/scikit-build-core/append-cmakeFlags.sh)
    # reads in every nixpkgs version that ships it; preConfigure runs before
    # that hook (runHook calls the implicit hook first,
    # pkgs/stdenv/generic/setup.sh).
    preConfigure = ''
      cmakeFlagsArray+=(${lib.escapeShellArgs cmakeFlags})

      # Memory-safe parallelism, decided on the builder (only it knows its
      # memory): jobs x nvcc threads from the recipe's measured per-job peak,
      # MemAvailable and the cgroup limit. The one implementation of the
      # rule, shared with `blackwell-stack kernel build`; it fails the build
      # with the reason when not even one job fits.
      jobPlan="$(python3 ${../../src/blackwell_stack/kernel/jobs.py} --recipe ${recipeFile} --cores "$NIX_BUILD_CORES" --cmake cmake --format shell)"
      echo "sgl-kernel job plan: $jobPlan"
      eval "$jobPlan"
      export CMAKE_BUILD_PARALLEL_LEVEL MAX_JOBS
      cmakeFlagsArray+=("''${plannedCmakeFlags[@]}")

      mkdir -p "$NIX_BUILD_TOP/fetchcontent"
      ${writableCopies}
      cmakeFlagsArray+=(${lib.concatMapStringsSep " " (flag: ''"${flag}"'') fetchContentFlags})
      # Through the environment CMake initialises CMAKE_CXX_FLAGS and
      # CMAKE_CUDA_FLAGS from: a -D value with spaces would be split by
      # scikit-build-core's setup hook.
      prefixMap="-ffile-prefix-map=$NIX_BUILD_TOP=build ${lib.concatStringsSep " " prefixMaps}"
      export CXXFLAGS="''${CXXFLAGS:+$CXXFLAGS }$prefixMap"
      export CUDAFLAGS="''${CUDAFLAGS:+$CUDAFLAGS }$(printf -- '-Xcompiler=%s ' $prefixMap)"
    '';

    # Reproducible wheel: the recipe's environment sets SOURCE_DATE_EPOCH
    # (1980-01-01), which scikit-build-core uses for the wheel's timestamps,
    # and nvcc's --objdir-as-tempdir and -frandom-seed in CUDAFLAGS; build and
    # source paths are mapped away above (docs/sgl-kernel.md).
    env = recipeEnvironment // {
      # cannot find -lcuda: link against the driver stub (nixpkgs' sglang-kernel).
      NIX_LDFLAGS = "-L${lib.getOutput "stubs" cudaPackages.cuda_cudart}/lib/stubs";
    };

    # Importing needs a GPU (load_utils.py loads common_ops, which needs
    # libcuda.so.1): see passthru.gpuCheck instead of pythonImportsCheck.
    doCheck = false;

    passthru = {
      inherit sources;
      wheel = package.dist;
      fetchContentSources = lib.listToAttrs (map (dep: lib.nameValuePair dep.name dep.src) dependencies);

      # Import and a small NVFP4 GEMM on a real GPU. Needs a builder with the
      # "cuda" system feature (programs.nix-required-mounts); never part of
      # the default checks.
      gpuCheck =
        runCommand "sgl-kernel-${package.version}-gpu-check"
          {
            nativeBuildInputs = [ (python.withPackages (_: [ package ])) ];
            requiredSystemFeatures = [ "cuda" ];
          }
          ''
            python ${./gpu_check.py}
            touch "$out"
          '';
    };

    meta = {
      description = "Kernel library for SGLang, built from source for the recipe's GPUs (default SM120)";
      homepage = "https://github.com/sgl-project/sglang/tree/v0.5.9/sgl-kernel";
      license = lib.licenses.asl20;
      platforms = [ "x86_64-linux" ];
    };
  };
in
package
