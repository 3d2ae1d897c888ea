# SGLang 0.5.9 from its PyPI wheel, on the stack's runtime: the pinned torch
# nightly (overlays/torch-nightly.nix), flashinfer 0.6.5 (flashinfer-python and
# flashinfer-cubin, versions equal) and sgl-kernel 0.3.21 built from source
# (pkgs/sgl-kernel). Wheels and hashes come from ./pins.json (PyPI's registry
# sha256, checked by downloading), never typed here.
#
# The wheel's METADATA pins torch==2.9.1, torchaudio==2.9.1 and
# flashinfer_python/flashinfer_cubin==0.6.3 (shared FACTS section 2); the known-
# working deployment runs the nightly and flashinfer 0.6.5, so those pins are
# relaxed with nixpkgs' pythonRelaxDeps (mk-python-derivation.nix adds
# pythonRelaxDepsHook when the attribute is set; the hook rewrites
# Requires-Dist in the wheel's METADATA before install, so
# pythonRuntimeDepsCheck still checks every name; see pythonRelaxDeps below).
#
# No source patch: the SM120 fix 0.5.9 lacks for this profile is sglang PR
# #20047 (auto picks flashinfer_cudnn for FP4 GEMM on SM120); the profile passes
# --fp4-gemm-backend flashinfer_cudnn explicitly and modules/rules.json refuses
# the 0.5.9 default (flashinfer_cutlass), which covers it without patching the
# wheel.
{
  lib,
  stdenv,
  python,
  buildPythonPackage,
  fetchurl,

  # sglang's Requires-Dist (sglang-0.5.9.dist-info/METADATA), in its order
  ipython,
  aiohttp,
  apache-tvm-ffi,
  anthropic,
  blobfile,
  build,
  compressed-tensors,
  datasets,
  einops,
  fastapi,
  gguf,
  hf-transfer,
  huggingface-hub,
  interegular,
  llguidance,
  modelscope,
  msgspec,
  ninja,
  numpy,
  nvidia-cutlass-dsl,
  nvidia-ml-py,
  openai-harmony,
  openai,
  orjson,
  outlines,
  packaging,
  partial-json-parser,
  pillow,
  prometheus-client,
  psutil,
  pybase64,
  pydantic,
  python-multipart,
  pyzmq,
  quack-kernels,
  requests,
  scipy,
  sentencepiece,
  setproctitle,
  sgl-kernel,
  soundfile,
  tiktoken,
  timm,
  torch-memory-saver,
  torch,
  torchao,
  torchaudio,
  torchcodec,
  torchvision,
  tqdm,
  transformers,
  uvicorn,
  uvloop,
  xgrammar,
  smg-grpc-proto,
  grpcio,
  grpcio-reflection,
  grpcio-health-checking,

  # flashinfer-python's Requires-Dist (0.6.5)
  click,
  nvidia-cudnn-frontend,
  tabulate,
}:
let
  pins = lib.importJSON ./pins.json;

  # A pinned wheel (fetchurl'd under its own file name, which the wheel hooks
  # match on), or a throw naming the one command that fills the pin.
  wheelPin = (import ../../lib/pins.nix).wheel {
    inherit pins;
    file = "pkgs/sglang/pins.json";
  };
  pinnedWheel =
    name:
    let
      pin = wheelPin name stdenv.hostPlatform.system python.pythonVersion;
    in
    {
      inherit (pin) version;
      src = fetchurl { inherit (pin) name url hash; };
    };

  flashinfer-cubin = buildPythonPackage {
    pname = "flashinfer-cubin";
    inherit (pinnedWheel "flashinfer-cubin") version src;
    format = "wheel";
    # Precompiled cubins (data files, no ELF objects): nothing to patch or strip.
    dontStrip = true;
    pythonImportsCheck = [ "flashinfer_cubin" ];
    meta = {
      description = "Precompiled flashinfer kernels (cubins), version-locked to flashinfer-python";
      homepage = "https://github.com/flashinfer-ai/flashinfer";
      license = lib.licenses.asl20;
    };
  };

  flashinfer-python = buildPythonPackage {
    pname = "flashinfer-python";
    inherit (pinnedWheel "flashinfer-python") version src;
    format = "wheel";
    dependencies = [
      apache-tvm-ffi
      click
      einops
      ninja
      numpy
      nvidia-cudnn-frontend
      nvidia-cutlass-dsl
      nvidia-ml-py
      packaging
      requests
      tabulate
      torch
      tqdm
      flashinfer-cubin
    ];
    # Its constraints (apache-tvm-ffi <0.2, nvidia-cudnn-frontend >=1.13, ...)
    # take nixpkgs' versions; the names are still checked.
    pythonRelaxDeps = true;
    # flashinfer-python's METADATA does not name flashinfer-cubin; it looks the
    # package up at run time and must find the same version (flashinfer-cubin
    # and flashinfer-python versions equal: FACTS section 1).
    pythonImportsCheck = [ "flashinfer" ];
    passthru.cubin = flashinfer-cubin;
    meta = {
      description = "FlashInfer kernels for LLM serving (JIT front end)";
      homepage = "https://github.com/flashinfer-ai/flashinfer";
      license = lib.licenses.asl20;
    };
  };

  sglangPin = pinnedWheel "sglang";
in
# With every constraint relaxed, keep the one that must stay exact: the wheel
# requires sgl-kernel==0.3.21 (its METADATA; sglang issue #19501).
assert lib.assertMsg (sgl-kernel.version == "0.3.21")
  "blackwell-stack: sglang 0.5.9 requires sgl-kernel==0.3.21, the sgl-kernel derivation is ${sgl-kernel.version}";
assert lib.assertMsg (flashinfer-python.version == flashinfer-cubin.version)
  "blackwell-stack: flashinfer-python ${flashinfer-python.version} and flashinfer-cubin ${flashinfer-cubin.version} must be the same version (pkgs/sglang/pins.json)";
buildPythonPackage {
  pname = "sglang";
  inherit (sglangPin) version src;
  format = "wheel";

  dependencies = [
    ipython
    aiohttp
    apache-tvm-ffi
    anthropic
    blobfile
    build
    compressed-tensors
    datasets
    einops
    fastapi
    flashinfer-python
    flashinfer-cubin
    gguf
    hf-transfer
    huggingface-hub
    interegular
    llguidance
    modelscope
    msgspec
    ninja
    numpy
    nvidia-cutlass-dsl
    nvidia-ml-py
    openai-harmony
    openai
    orjson
    outlines
    packaging
    partial-json-parser
    pillow
    prometheus-client
    psutil
    pybase64
    pydantic
    python-multipart
    pyzmq
    quack-kernels
    requests
    scipy
    sentencepiece
    setproctitle
    sgl-kernel
    soundfile
    tiktoken
    timm
    torch-memory-saver
    torch
    torchao
    torchaudio
    torchcodec
    torchvision
    tqdm
    transformers
    uvicorn
    uvloop
    xgrammar
    smg-grpc-proto
    grpcio
    grpcio-reflection
    grpcio-health-checking
  ];

  # Every version constraint of the wheel is relaxed, names stay (so
  # pythonRuntimeDepsCheck still requires each package). A list would be
  # wrong here: the hook puts each name into a sed regex with no end anchor
  # (s/(Requires-Dist: $dep...)[^;]*.../), so "torch" would also rewrite
  # torchaudio, torchao, torchcodec, torchvision and torch_memory_saver into
  # "torch", and "openai" would swallow openai-harmony. The pins that differ
  # from the stack are torch==2.9.1, torchaudio==2.9.1 (nightly 2.12.0.dev)
  # and flashinfer_python/flashinfer_cubin==0.6.3 (0.6.5); the other exact
  # pins take nixpkgs' versions, as nixpkgs' own sglang package relaxes them.
  pythonRelaxDeps = true;

  pythonRemoveDeps = [
    # nixpkgs splits cuda-python; sglang uses cuda.bindings (as nixpkgs' sglang).
    "cuda-python"
    # A sampling profiler for debugging, not needed to serve (as nixpkgs' sglang).
    "py-spy"
    # Video decoding for video inputs; not packaged here, not used by text or image requests.
    "decord2"
  ];

  # sgl-kernel is the from-source build (FACTS section 2: the PyPI wheel
  # cannot load on torch >= 2.10); its version is asserted above.
  pythonImportsCheck = [ "sglang" ];

  passthru = {
    inherit flashinfer-python flashinfer-cubin sgl-kernel;
    pins = pins;
    # The wheel's exact pins that the stack replaces (tests check them against METADATA).
    stackReplacesPins = [ "torch" "torchaudio" "flashinfer_python" "flashinfer_cubin" ];
  };

  meta = {
    description = "SGLang ${sglangPin.version} (PyPI wheel) on the blackwell-stack runtime for SM120";
    homepage = "https://github.com/sgl-project/sglang";
    license = lib.licenses.asl20;
    mainProgram = "sglang";
    platforms = [ "x86_64-linux" ];
  };
}
