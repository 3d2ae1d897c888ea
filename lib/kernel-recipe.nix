# The sgl-kernel recipe (pkgs/sgl-kernel/recipe.json) as CMake defines and
# environment: builtins only, so tests evaluate it with a bare nix-instantiate
# and compare it with blackwell_stack.kernel.inputs.recipe on the same JSON.
#
#   kr = import ./lib/kernel-recipe.nix;
#   recipe = builtins.fromJSON (builtins.readFile ./pkgs/sgl-kernel/recipe.json);
#   kr.cmakeFlags { inherit recipe; }            # [ "-DCMAKE_BUILD_TYPE=Release" ... ]
#   kr.environment { inherit recipe; }           # { TORCH_CUDA_ARCH_LIST = "12.0a"; }
#   kr.cmakeFlags { inherit recipe; archs = "10.0a;12.0a"; planned = { SGL_KERNEL_COMPILE_THREADS = 2; }; }
#
# The memory-safe job plan needs the builder's memory, known only at build
# time: the derivation runs src/blackwell_stack/kernel/jobs.py (see its
# docstring) and appends what it prints; `planned` here is for callers that
# already have a plan.
let
  inherit (builtins) attrNames concatStringsSep elem elemAt filter fromJSON head isList isString listToAttrs map match split toString;

  trim = s:
    let m = match "[[:space:]]*(.*[^[:space:]]|)[[:space:]]*" s;
    in if m == null then s else head m;

  # "12.0a" / "10.0a;12.0a" / [ "12.0a" ] -> [ "12.0a" ... ]
  archList = archs:
    filter (a: a != "")
      (map trim (if isList archs then archs else filter isString (split "[;,]" archs)));

  # The targets of a list that lack their architecture-specific suffix from
  # recipe.arch_specific_from_major on ("9.0", not "9.0a"): sgl-kernel's
  # Hopper/Blackwell CUTLASS kernels exist only in the a target (the recipe's
  # arch_specific_note cites upstream). "X.Y" / "X.Ya" / "X.Yf" as patch 0005 reads it.
  plainTargets = recipe: archs:
    filter
      (a:
        let m = match "(0|[1-9][0-9]*)\\.([0-9]+)([af]?)" a;
        in m != null && elemAt m 2 == "" && fromJSON (head m) >= recipe.arch_specific_from_major)
      archs;

  # The ;-joined SGL_KERNEL_CUDA_ARCHS value, or a throw: a plain Hopper/Blackwell
  # target (with the a one to use), or one outside supported_archs (naming the valid ones).
  checkArchs = recipe: archs:
    let
      wanted = archList archs;
      plain = plainTargets recipe wanted;
      unknown = filter (a: !(elem a recipe.supported_archs)) wanted;
    in
    if wanted != [ ] && plain != [ ] then
      throw ("blackwell-stack: plain CUDA architecture ${concatStringsSep ", " plain} refused: from compute capability "
        + "${toString recipe.arch_specific_from_major} on, sgl-kernel's CUTLASS kernels exist only in the architecture-specific "
        + "target, and a plain one builds them as stubs that return wrong numbers without an error; use "
        + concatStringsSep ", " (map (a: a + "a") plain))
    else if wanted == [ ] || unknown != [ ] then
      throw "blackwell-stack: unknown CUDA architecture ${if unknown == [ ] then "(none given)" else concatStringsSep ", " unknown}; valid: ${concatStringsSep ", " recipe.supported_archs}"
    else concatStringsSep ";" wanted;

  setAll = names: value: listToAttrs (map (name: { inherit name value; }) names);

  fromPlan = names: planned:
    listToAttrs (map (name: { inherit name; value = toString planned.${name}; })
      (filter (name: planned ? ${name}) names));
in
rec {
  inherit archList checkArchs plainTargets;

  # { NAME = "VALUE"; }: the recipe's defines, the architecture list, then the plan.
  defines = { recipe, archs ? recipe.arch, planned ? { } }:
    let arch = checkArchs recipe archs;
    in recipe.cmake_defines
      // setAll recipe.arch_defines arch
      // fromPlan recipe.planned_defines planned;

  # [ "-DNAME=VALUE" ... ] sorted by name (attrNames order).
  cmakeFlags = args:
    let d = defines args;
    in map (name: "-D${name}=${d.${name}}") (attrNames d);

  # The defines as a CMake initial-cache script (`cmake -C FILE`), one
  # `set(NAME "VALUE" CACHE STRING "")` each: the way into CMake for values
  # with spaces (the archive rules), which a shell-split list of
  # `-DNAME=VALUE` arguments cannot carry. A quoted argument keeps `;` (a list
  # stays a list, as with -D); \, " and $ are escaped. No FORCE: a -D given
  # as well (the planned job settings) wins, as it would over a -D given first.
  initialCache = args:
    let
      d = defines args;
      quote = value: builtins.replaceStrings [ "\\" "\"" "$" ] [ "\\\\" "\\\"" "\\$" ] value;
    in
    concatStringsSep "" (map (name: "set(${name} \"${quote d.${name}}\" CACHE STRING \"\")\n") (attrNames d));

  # { TORCH_CUDA_ARCH_LIST = "12.0a"; ... } for the builder's environment.
  environment = { recipe, archs ? recipe.arch, planned ? { } }:
    let arch = checkArchs recipe archs;
    in recipe.environment
      // setAll recipe.arch_environment arch
      // fromPlan recipe.planned_environment planned;
}
