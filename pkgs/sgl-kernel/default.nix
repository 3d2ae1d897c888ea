# sgl-kernel 0.3.21 from source, built with pyproject.nix's builders inside a
# stack's Python set (nix/fixups/sgl-kernel.nix), against that set's torch:
# the sgl-kernel/ directory of sglang v0.5.9, the patches of
# ../../patches/sgl-kernel, the recipe of ./recipe.json (default: SM120 only,
# FP4 on, FA3 off) and the CUDA 13.0 toolchain from nixpkgs.
#
# Data, not code, lives next to this file:
#   ./sources.json  the sglang tree and every FetchContent dependency, with
#                   hashes and where they came from (../../lib/kernel-sources.nix)
#   ./recipe.json   CMake defines and environment (../../lib/kernel-recipe.nix)
#
# Modelled on nixpkgs' pkgs/development/python-modules/sglang-kernel/default.nix
# (b84c6bb3); differences: every dependency comes from sources.json,
# FETCHCONTENT_FULLY_DISCONNECTED=ON so that CMake downloads nothing while it
# configures, architectures come from the recipe, the wheel is an output
# (`dist`), and the GPU test is a separate derivation.
#
# CMake settings reach scikit-build-core through uv build's --config-setting
# (pyproject.nix's build hook expands $uvBuildFlags unquoted, so no setting
# may hold a space): the recipe's defines as one initial-cache script
# (`cmake.args=-C<file>`, lib/kernel-recipe.nix initialCache), the rest as
# `cmake.define.NAME=VALUE`, each one -DNAME=VALUE argument to CMake. Either
# way a list such as SGL_KERNEL_CUDA_ARCHS=10.0a;12.0a stays one value.
# (nixpkgs' own scikit-build-core setup hook joins cmakeFlags into
# SKBUILD_CMAKE_ARGS with `;` and would split it; the stack's
# scikit-build-core is build-system-pkgs' wheel, which has no setup hook.)
{
  lib,
  version,
  autoAddDriverRunpath,
  fetchFromGitHub,
  fetchzip,
  runCommand,

  # from the stack's Python set
  pyprojectHook,
  resolveBuildSystem,
  mkVirtualEnv,
  python,
  torch,

  # from nixpkgs (passed by name: the set's `ninja` is the lock's Python wheel)
  cmake,
  ninja,
  cudaPackages,
  numactl,

  # The recipe as data; override to build for other GPUs or with another
  # measured per-job memory peak (recipe.memory.per_nvcc_thread_peak_mib).
  sglKernelRecipe ? lib.importJSON ./recipe.json,
}:
let
  sources = lib.importJSON ./sources.json;
  kernelSources = import ../../lib/kernel-sources.nix;

  # The recipe renders to CMake defines and environment through builtins-only
  # functions (the same ones tests compare with src/blackwell_stack/kernel/inputs/recipe.py):
  #   defines     -> { SGL_KERNEL_CUDA_ARCHS = "12.0a"; SGL_KERNEL_ENABLE_FP4 = "ON"; ... }
  #   environment -> { TORCH_CUDA_ARCH_LIST = "12.0a"; }
  recipe = sglKernelRecipe;
  recipeFile = builtins.toFile "sgl-kernel-recipe.json" (builtins.toJSON recipe);
  kernelRecipe = import ../../lib/kernel-recipe.nix;
  # The recipe's defines as a CMake initial-cache script: some values have
  # spaces (the deterministic archive rules), which the build hook's unquoted
  # $uvBuildFlags would split; one `cmake.args=-C<file>` setting carries them
  # all. A -D given as well (the planned job settings) wins over it.
  recipeCache = builtins.toFile "sgl-kernel-recipe.cmake" (kernelRecipe.initialCache { inherit recipe; });
  recipeEnvironment = kernelRecipe.environment { inherit recipe; };

  # The project's check of a wheel's C++ runtime (src/blackwell_stack/formats/cxxruntime.py, the
  # standard library only): just its files, so that a change elsewhere in the CLI does not rebuild the kernel.
  cxxRuntimeCheckFiles = [
    "blackwell_stack/__init__.py"
    "blackwell_stack/errors.py"
    "blackwell_stack/inputfiles.py"
    "blackwell_stack/formats/__init__.py"
    "blackwell_stack/formats/elf.py"
    "blackwell_stack/formats/wheelzip.py"
    "blackwell_stack/formats/cxxruntime.py"
  ];
  # builtins.path with a filter, not lib.fileset (builtins.readFileType), so the tests' Nix 2.8 evaluates it too.
  cxxRuntimeCheck = builtins.path {
    name = "blackwell-stack-cxx-runtime-check";
    path = ../../src;
    filter =
      path: type:
      let
        rel = lib.removePrefix "${toString ../../src}/" (toString path);
      in
      builtins.elem rel cxxRuntimeCheckFiles
      || (type == "directory" && builtins.any (lib.hasPrefix "${rel}/") cxxRuntimeCheckFiles);
  };

  # Architectures the recipe asks for ([ ] = upstream's hard-coded list);
  # patch 0005 configures FlashMLA only for its own architectures, so its
  # sources are fetched only then.
  cudaArchs = kernelSources.cudaArchsFromFlags (kernelRecipe.cmakeFlags { inherit recipe; });

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
  # copy above; $NIX_BUILD_TOP is expanded by the shell in preBuild). One
  # function turns that into the FETCHCONTENT_* settings
  # (FETCHCONTENT_FULLY_DISCONNECTED=ON: CMake downloads nothing) and the
  # prefix maps, here and in `blackwell-stack kernel build --sources`
  # (lib/kernel-sources.nix, compared with the Python side by the tests).
  dependencyDirs = lib.listToAttrs (
    map (
      dep:
      lib.nameValuePair dep.name (
        if dep.writable then "$NIX_BUILD_TOP/fetchcontent/${dep.name}" else "${dep.src}"
      )
    ) dependencies
  );
  fetchContentSettings = lib.mapAttrsToList (
    name: value: "--config-setting=cmake.define.${name}=${value}"
  ) (kernelSources.fetchContentSettings sources cudaArchs dependencyDirs);

  # No build directory or source store path in the wheel: __FILE__ and
  # similar strings are rewritten to short names.
  prefixMaps = kernelSources.prefixMaps sources cudaArchs dependencyDirs;

  defines = {
    # find_package(Torch): in the build, torch is on PYTHONPATH only
    # (pyproject.nix's NIX_PYPROJECT_PYTHONPATH), not in the interpreter's
    # site-packages, where scikit-build-core points CMAKE_PREFIX_PATH; CMake
    # finds no TorchConfig.cmake without this (docs/nix-rehearsal.md).
    Torch_DIR = "${torch}/${python.sitePackages}/torch/share/cmake/Torch";
    # nixpkgs' sglang-kernel passes it too: find_package(Torch) does not
    # always set CUDA_VERSION, which the CMakeLists compares everywhere.
    CUDA_VERSION = cudaPackages.cudaMajorMinorVersion;
    # mscclpp's tests are not built (sgl-kernel links mscclpp_static only).
    MSCCLPP_BUILD_TESTS = "OFF";
  };

  configSettings = [
    "--config-setting=cmake.args=-C${recipeCache}"
  ]
  ++ lib.mapAttrsToList (name: value: "--config-setting=cmake.define.${name}=${value}") defines;
in
assert lib.assertMsg (version == sources.sglang.sgl_kernel_version)
  "blackwell-stack: the stack builds sgl-kernel ${version}, pkgs/sgl-kernel/sources.json pins ${sources.sglang.sgl_kernel_version}";
assert lib.assertMsg (cudaPackages.cudaMajorMinorVersion == "13.0")
  "blackwell-stack: sgl-kernel is built with CUDA 13.0 (the stack's torch is a CUDA 13.0 build), got ${cudaPackages.cudaMajorMinorVersion}";
# torch here is the set's, i.e. the stack's locked wheel, which carries no
# CUDA stdenv of its own; cudaPackages.backendStdenv is the host compiler
# nvcc supports (what nixpkgs' source-built CUDA packages use).
cudaPackages.backendStdenv.mkDerivation (finalAttrs: {
  pname = "sgl-kernel";
  inherit version;

  src = fetchFromGitHub {
    inherit (sglangPin)
      owner
      repo
      rev
      hash
      ;
  };
  sourceRoot = "source/sgl-kernel";

  # Sorted by number, applied with -p1 inside sourceRoot, without fuzz (GNU
  # patch's default allows 2 lines): a hunk whose context moved upstream fails
  # here, as `blackwell-stack kernel patches check` reports it, instead of
  # applying at a guess (stdenv's patchPhase runs `patch ${patchFlags:--p1}`).
  patches = import ../../lib/patch-series.nix ../../patches/sgl-kernel;
  patchFlags = [
    "-p1"
    "-F0"
  ];

  # `out`: the installed package, in the stack's environment; `dist`: the
  # wheel (pyproject.nix's install hook copies it there), for pip/uv users.
  outputs = [
    "out"
    "dist"
  ];
  # The hook refuses a wheel that names a store path, and this one does: Nix's
  # linker wrapper gives its libraries a RUNPATH into the store (CUDA, torch's
  # lib/). Outside Nix those directories do not exist and the loader takes
  # the libraries the venv's torch has already loaded.
  dontUsePyprojectInstallDistCheck = true;

  nativeBuildInputs = [
    pyprojectHook
    # libcuda.so.1 comes from the host's driver (/run/opengl-driver/lib).
    autoAddDriverRunpath
    cudaPackages.cuda_nvcc
    cmake
    ninja
  ]
  # sgl-kernel's [build-system] is scikit-build-core and torch (its CMakeLists
  # imports torch for its C++ ABI and includes torch's CMake config); `wheel` too, which
  # pyproject.toml does not name. No build isolation: this torch is the one
  # compiled against.
  ++ resolveBuildSystem {
    scikit-build-core = [ ];
    wheel = [ ];
    torch = [ ];
  };

  buildInputs = [
    cudaPackages.cuda_cccl # cuda/atomic, cub, thrust (un-nested from include/cccl in nixpkgs)
    cudaPackages.cuda_cudart
    cudaPackages.cuda_nvrtc # deep_gemm_cpp links nvrtc
    cudaPackages.libcublas # cublas_v2.h, -lcublas -lcublasLt
    cudaPackages.libcurand # curand.h
    cudaPackages.libcusolver # cusolver_common.h
    cudaPackages.libcusparse # cusparse.h
    numactl # mscclpp: find_package(NUMA REQUIRED)
  ];

  # The check `kernel build` makes before it calls a wheel built, run as huggingface/kernel-builder runs its
  # ABI check: every library must use the process's libstdc++.so.6. A wheel whose libraries carried their
  # own C++ runtime crashed SGLang at start-up (benchmarks/sglang-gpu/); nixpkgs' compilers link libstdc++
  # dynamically, and this keeps it so.
  doInstallCheck = true;
  installCheckPhase = ''
    runHook preInstallCheck
    PYTHONPATH=${cxxRuntimeCheck} ${python.interpreter} -m blackwell_stack.formats.cxxruntime "$dist"/*.whl
    runHook postInstallCheck
  '';

  # Its import needs torch (the venv gets it from the stack anyway).
  passthru.dependencies = {
    torch = [ ];
  };

  # scikit-build-core runs CMake and ninja itself: their setup hooks must
  # not take over the configure, build and install phases.
  dontUseCmakeConfigure = true;
  dontUseNinjaBuild = true;
  dontUseNinjaInstall = true;
  dontUseNinjaCheck = true;

  uvBuildFlags = configSettings;

  preBuild = ''
    # Memory-safe parallelism, decided on the builder (only it knows its
    # memory): jobs x nvcc threads from the recipe's measured per-job peak,
    # MemAvailable and the cgroup limit. The one implementation of the rule,
    # shared with `blackwell-stack kernel build`; it fails the build with the
    # reason when not even one job fits.
    # With CMake >= 4.2 the heavy units compile in a ninja pool of their own
    # (patch 0008), the rest wide.
    jobPlan="$(python3 ${../../src/blackwell_stack/kernel/jobs.py} --recipe ${recipeFile} --cores "$NIX_BUILD_CORES" --cmake cmake --format shell)"
    echo "sgl-kernel job plan: $jobPlan"
    eval "$jobPlan"
    export CMAKE_BUILD_PARALLEL_LEVEL MAX_JOBS
    for flag in "''${plannedCmakeFlags[@]}"; do
      uvBuildFlags+=" --config-setting=cmake.define.''${flag#-D}"
    done

    # nixpkgs' setupCudaHook (from cuda_nvcc) leaves its CMake settings in
    # cmakeFlags and cmakeFlagsArray: CUDAToolkit_ROOT and
    # CUDAToolkit_INCLUDE_DIR (every CUDA input, ';'-separated) and the CUDA
    # host compiler. nixpkgs' scikit-build-core hook would forward them; the
    # stack's has none. torch's FindCUDAToolkit looks for cuda_runtime.h only
    # beside nvcc unless CUDAToolkit_INCLUDE_DIR is set, and nixpkgs keeps it
    # in cuda_cudart's own output (docs/nix-rehearsal.md).
    for flag in ''${cmakeFlags-} "''${cmakeFlagsArray[@]}"; do
      uvBuildFlags+=" --config-setting=cmake.define.''${flag#-D}"
    done

    mkdir -p "$NIX_BUILD_TOP/fetchcontent"
    ${writableCopies}
    ${lib.concatMapStrings (setting: ''
      uvBuildFlags+=" ${setting}"
    '') fetchContentSettings}
    # Through the environment CMake initialises CMAKE_CXX_FLAGS and
    # CMAKE_CUDA_FLAGS from: a define value with spaces would be split by the
    # build hook's unquoted $uvBuildFlags.
    prefixMap="-ffile-prefix-map=$NIX_BUILD_TOP=build ${lib.concatStringsSep " " prefixMaps}"
    export CXXFLAGS="''${CXXFLAGS:+$CXXFLAGS }$prefixMap"
    export CUDAFLAGS="''${CUDAFLAGS:+$CUDAFLAGS }$(printf -- '-Xcompiler=%s ' $prefixMap)"
  '';

  # Reproducible wheel (docs/sgl-kernel.md): the recipe's environment sets
  # SOURCE_DATE_EPOCH (1980-01-01), which scikit-build-core uses for the
  # wheel's timestamps, and nvcc's --objdir-as-tempdir and -frandom-seed in
  # CUDAFLAGS; build and source paths are mapped away above.
  env = recipeEnvironment // {
    # cannot find -lcuda: link against the driver stub (nixpkgs' sglang-kernel).
    NIX_LDFLAGS = "-L${lib.getOutput "stubs" cudaPackages.cuda_cudart}/lib/stubs";
  };

  passthru = {
    inherit sources torch cxxRuntimeCheckFiles;
    wheel = finalAttrs.finalPackage.dist;
    fetchContentSources = lib.listToAttrs (map (dep: lib.nameValuePair dep.name dep.src) dependencies);

    # Import and a small NVFP4 GEMM on a real GPU. Needs a builder with the
    # "cuda" system feature (programs.nix-required-mounts); never part of
    # the default checks.
    gpuCheck =
      runCommand "sgl-kernel-${version}-gpu-check"
        {
          # The kernel and its torch (with torch's own dependencies), from the same set.
          nativeBuildInputs = [ (mkVirtualEnv "sgl-kernel-${version}-gpu-check-env" { sgl-kernel = [ ]; }) ];
          requiredSystemFeatures = [ "cuda" ];
        }
        ''
          python ${./gpu_check.py}
          touch "$out"
        '';
  };

  meta = {
    description = "Kernel library for SGLang, built from source for the recipe's GPUs (default SM120) against the stack's torch";
    homepage = "https://github.com/sgl-project/sglang/tree/v0.5.9/sgl-kernel";
    license = lib.licenses.asl20;
    platforms = [ "x86_64-linux" ];
  };
})
