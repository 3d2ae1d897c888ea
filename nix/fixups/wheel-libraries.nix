# autoPatchelf for the locked wheels. uv2nix patches every wheel with
# autoPatchelfHook, which looks for each DT_NEEDED library by file name in the
# lib/ directories of the build inputs, and fails on any it cannot find. The
# CUDA wheels keep their libraries under site-packages (nvidia/cu13/lib,
# nvidia/cudnn/lib, torch/lib, ...) and find each other there through
# $ORIGIN-relative RUNPATHs in a venv; in Nix each wheel is its own store path.
#
# For every wheel that stacks/<stack>/wheels.json says links a library it does
# not ship (read from the real wheels):
#   - from another locked wheel: that wheel's site-packages is an autoPatchelf
#     search path (e.g. torch -> nvidia-cublas, nvidia-cudnn-cu13,
#     nvidia-nvshmem-cu13 for libnvshmem_host.so.3, ...), so the RUNPATH names
#     the exact store paths;
#   - from the NVIDIA driver (libcuda.so.1): never bundled, and not required
#     at build time;
#   - from nixpkgs or left missing: as ./wheel-libraries.json says, with the
#     reason; a missing library it does not name stops evaluation.
# autoPatchelf replaces each RUNPATH with the directories it resolved, so the
# wheel's own $ORIGIN-relative entries are appended again: they are how a
# wheel finds what it dlopens beside itself (libnvrtc-builtins next to
# libnvrtc, cuDNN's engine libraries, decord2.libs). Then the driver's
# directory (addDriverRunpath.driverLink), on every wheel that carries an ELF,
# as nixpkgs gives every CUDA redistributable autoAddDriverRunpath: NVIDIA's
# libraries dlopen the driver (libcudart.so.13, libcublasLt.so.13 and
# libcusparseLt.so.0 load libcuda.so.1; NCCL loads libnvidia-ml.so.1) without
# DT_NEEDing it, and glibc searches the RUNPATH of the object that calls
# dlopen, not its dependents'. Given only to the wheels that DT_NEED the
# driver, torch found no GPU (benchmarks/driver-runpath/).
#
# Python code that dlopens a driver library by name from the interpreter
# (ctypes.CDLL: pynvml, cuda-pathfinder for cuda-bindings, torch.cuda) has no
# RUNPATH to give: glibc searches the interpreter's. The audit lists every
# Python file of a locked wheel that names a driver library (wheels.json
# driver_by_name); for those that load it, the name in the source becomes the
# driver link's path (wheel-libraries.json driver_by_name), for each file this
# stack's wheel has. A wheel whose source no longer holds the string stops the
# build (--replace-fail).
{
  lib,
  pkgs,
  stack,
  audit,
  ...
}:
final: prev:
let
  decisions = lib.importJSON ./wheel-libraries.json;
  inherit (prev) python;
  driverLibraryDir = "${pkgs.addDriverRunpath.driverLink}/lib";
  fromNixpkgs = lib.mapAttrs (_: d: d.attribute) decisions.from_nixpkgs;

  fixup =
    package: info:
    let
      libraries = builtins.attrNames info.needs;
      where = library: info.needs.${library};
      ofKind = kind: builtins.filter (library: where library == kind) libraries;
      providers = lib.unique (
        lib.concatMap (library: (where library).from) (builtins.filter (library: builtins.isAttrs (where library)) libraries)
      );
      missing = ofKind "missing";
      mapped = builtins.filter (library: fromNixpkgs ? ${library}) missing;
      # The libraries wheel-libraries.json leaves missing for this package that
      # this stack's wheel does link (the file serves every stack).
      allowed = builtins.filter (library: builtins.elem library missing) (
        decisions.left_missing.${package}.libraries or [ ]
      );
      uncovered = builtins.filter (library: !(fromNixpkgs ? ${library}) && !(builtins.elem library allowed)) missing;
      driver = ofKind "driver";
      searchPaths =
        map (provider: "${final.${provider}}/${python.sitePackages}") providers
        ++ map (library: "${lib.getLib pkgs.${fromNixpkgs.${library}}}/lib") mapped;
    in
    if uncovered != [ ] then
      throw "blackwell-stack: stacks/${stack}/wheels.json says ${package} links ${builtins.concatStringsSep ", " uncovered}, which no locked wheel ships and nix/fixups/wheel-libraries.json neither maps to nixpkgs nor leaves missing with a reason. Find what provides it, then say so there."
    else
      prev.${package}.overrideAttrs (old: {
        preFixup =
          (old.preFixup or "")
          + lib.concatMapStrings (dir: ''
            addAutoPatchelfSearchPath ${dir}
          '') searchPaths;
        appendRunpaths = (old.appendRunpaths or [ ]) ++ info.origin_runpaths ++ [ driverLibraryDir ];
        autoPatchelfIgnoreMissingDeps = (old.autoPatchelfIgnoreMissingDeps or [ ]) ++ driver ++ allowed;
      });

  # The driver by name in Python: each load this stack's wheel has gets the driver link's path.
  loadsIn =
    package: entry:
    builtins.filter (
      load: builtins.elem load.library (audit.driver_by_name.${package}.${load.file} or [ ])
    ) entry.loads;
  byName =
    drv: loads:
    drv.overrideAttrs (old: {
      postInstall =
        (old.postInstall or "")
        + lib.concatMapStrings (load: ''
          substituteInPlace "$out/${python.sitePackages}/${load.file}" \
            --replace-fail ${lib.escapeShellArg load.replace} \
            ${lib.escapeShellArg (builtins.replaceStrings [ load.library ] [ "${driverLibraryDir}/${load.library}" ] load.replace)}
        '') loads;
    });
  byNameLoads = lib.filterAttrs (package: loads: prev ? ${package} && loads != [ ]) (
    lib.mapAttrs loadsIn (decisions.driver_by_name or { })
  );
  withElf = lib.mapAttrs fixup (lib.filterAttrs (_: info: info.elf_files > 0) audit.libraries);
in
# A package with both (torch) gets its RUNPATHs, then its sources.
withElf // lib.mapAttrs (package: loads: byName (withElf.${package} or prev.${package}) loads) byNameLoads
