# sgl-kernel's source pins (pkgs/sgl-kernel/sources.json) turned into what the
# derivation needs: which FetchContent dependencies a build uses, the CMake
# variable each one is passed as, and a throw naming the one command that
# fills a pin that is not verified. Builtins only, so that tests evaluate it
# with a bare nix-instantiate and compare with the JSON and the Python side.
let
  file = "pkgs/sgl-kernel/sources.json";

  lower = [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ];
  upper = [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ];
  toUpper = builtins.replaceStrings lower upper;

  unverifiedMessage = sources: what: entry:
    "blackwell-stack: the pin of ${what} in ${file} is not verified"
    + (if entry.reason or null != null then " (${entry.reason})" else "")
    + ". Fill it in with: ${sources.update_command}";

  usable = entry: (entry.verified or false) && (entry.hash or null) != null;

  # The entry itself when usable, else a throw with the update command.
  checked = sources: what: entry:
    if usable entry then entry else throw (unverifiedMessage sources what entry);

  # "-DSGL_KERNEL_CUDA_ARCHS=12.0a;9.0a" (also with a :STRING type) -> [ "12.0a" "9.0a" ]
  archPrefixes = [ "-DSGL_KERNEL_CUDA_ARCHS=" "-DSGL_KERNEL_CUDA_ARCHS:STRING=" ];
  archValue = flag:
    let
      matching = builtins.filter
        (prefix: builtins.substring 0 (builtins.stringLength prefix) flag == prefix)
        archPrefixes;
    in
    if matching == [ ] then null
    else
      let prefix = builtins.head matching;
      in builtins.substring (builtins.stringLength prefix) (builtins.stringLength flag) flag;
in
rec {
  inherit toUpper;

  # FetchContent name -> the cache variable that points FetchContent at a local copy.
  cmakeVariable = name: "FETCHCONTENT_SOURCE_DIR_${toUpper name}";

  # The target architectures a list of CMake flags asks for (the last
  # SGL_KERNEL_CUDA_ARCHS wins, as in CMake); [ ] means upstream's list.
  cudaArchsFromFlags = flags:
    let
      values = builtins.filter (v: v != null) (map archValue flags);
    in
    if values == [ ] then [ ]
    else builtins.filter (a: builtins.isString a && a != "") (builtins.split ";" (builtins.elemAt values (builtins.length values - 1)));

  # Whether a dependency is configured at all for these architectures
  # (patch 0005 skips FlashMLA unless one of its architectures is asked for).
  isNeeded = cudaArchs: entry:
    let
      wanted = entry.needed_for_archs or null;
    in
    wanted == null || cudaArchs == [ ] || builtins.any (a: builtins.elem a wanted) cudaArchs;

  # Names of the FetchContent dependencies a build for cudaArchs configures, sorted.
  neededNames = sources: cudaArchs:
    builtins.filter (name: isNeeded cudaArchs sources.fetchcontent.${name})
      (builtins.attrNames sources.fetchcontent);

  # The names a build for cudaArchs configures, each with a directory in dirs
  # (FetchContent name -> directory), or a throw naming the ones without.
  namesWithDirs = sources: cudaArchs: dirs:
    let
      names = neededNames sources cudaArchs;
      missing = builtins.filter (name: !(dirs ? ${name})) names;
    in
    if missing != [ ] then
      throw "blackwell-stack: no source directory for ${builtins.concatStringsSep ", " missing}"
    else names;

  # The FetchContent cache settings of a build for cudaArchs, given where each
  # dependency lies: every dependency the build configures points at its
  # directory, and FULLY_DISCONNECTED=ON keeps CMake from downloading or
  # updating anything. blackwell_stack.kernel.inputs.sources.fetchcontent_settings
  # is the same function for `blackwell-stack kernel build --sources`.
  fetchContentSettings = sources: cudaArchs: dirs:
    { FETCHCONTENT_FULLY_DISCONNECTED = "ON"; }
    // builtins.listToAttrs (map (name: { name = cmakeVariable name; value = toString dirs.${name}; })
      (namesWithDirs sources cudaArchs dirs));

  # -ffile-prefix-map flags that write each dependency's directory as its
  # FetchContent name, in neededNames order (sources.prefix_maps in Python).
  prefixMaps = sources: cudaArchs: dirs:
    map (name: "-ffile-prefix-map=${toString dirs.${name}}=${name}") (namesWithDirs sources cudaArchs dirs);

  # The shell that leaves in a fetched tree ($out, as fetchzip's postFetch
  # sees it: unpacked, before its final chmod) only what the pin's filter
  # selects: the parts the build reads. The pin's hash is of that tree;
  # blackwell_stack.kernel.inputs.source_filter selects the same for
  # `kernel sources check/fetch` and the build. A kept path that is missing
  # fails the fetch (mv), as a changed upstream tree should.
  filterScript = filter:
    if filter ? drop then
      builtins.concatStringsSep "" (map (path: "rm -r \"$out/${path}\"\n") filter.drop)
    else
      "kept=\"$TMPDIR/filter-kept\"\nmkdir \"$kept\"\n"
      + builtins.concatStringsSep "" (map
        (path: "mkdir -p \"$(dirname \"$kept/${path}\")\"\nmv \"$out/${path}\" \"$kept/${path}\"\n")
        filter.keep)
      + "rm -r \"$out\"\nmv \"$kept\" \"$out\"\n";

  # A fetcher's arguments for a pin: with its filter, a postFetch that applies it.
  fetchArgs = entry: names:
    builtins.intersectAttrs (builtins.listToAttrs (map (n: { name = n; value = null; }) names)) entry
    // (if entry ? filter then { postFetch = filterScript entry.filter; } else { });

  # The sglang source pin, checked.
  sglang = sources: checked sources "sglang" sources.sglang;

  # One FetchContent dependency, checked, with its submodules checked too:
  # { name, variable, fetcher, args, submodules = [ { path, args } ], writable }.
  # `args` are fetchFromGitHub's (owner, repo, rev, hash) or fetchzip's (url,
  # hash), with a postFetch where the pin has a filter (filterScript).
  dependency = sources: name:
    let
      entry = checked sources "fetchcontent.${name}" (sources.fetchcontent.${name} or (throw
        "blackwell-stack: ${file} has no FetchContent dependency ${name}"));
      fetcher = entry.fetcher or "fetchFromGitHub";
      submodules = entry.submodules or { };
    in
    # Forced first, so that even `.variable` of an unknown or unverified pin throws.
    builtins.seq entry {
      inherit name fetcher;
      variable = cmakeVariable name;
      args =
        if fetcher == "fetchzip" then fetchArgs entry [ "url" "hash" ]
        else fetchArgs entry [ "owner" "repo" "rev" "hash" ];
      submodules = map
        (path:
          let sub = checked sources "fetchcontent.${name}.submodules.${path}" submodules.${path};
          in { inherit path; args = fetchArgs sub [ "owner" "repo" "rev" "hash" ]; })
        (builtins.attrNames submodules);
      # Copied into the build directory when CMake edits it in place, or when
      # submodules have to be put inside it.
      writable = (entry.writable or false) || submodules != { };
    };

  # Every pin that is not verified, as "sglang", "fetchcontent.<name>" or
  # "fetchcontent.<name>.submodules.<path>", for checks and plan.
  unverified = sources:
    (if usable sources.sglang then [ ] else [ "sglang" ])
    ++ builtins.concatLists (map
      (name:
        let entry = sources.fetchcontent.${name};
        in (if usable entry then [ ] else [ "fetchcontent.${name}" ])
          ++ map (path: "fetchcontent.${name}.submodules.${path}")
            (builtins.filter (path: !(usable entry.submodules.${path}))
              (builtins.attrNames (entry.submodules or { }))))
      (builtins.attrNames sources.fetchcontent));
}
