# The SGLang service's command line as pure functions over JSON data (builtins
# only): the profile (modules/profiles/*.json) and the flag table of the
# runtime's SGLang version (modules/sglang-flags/<version>.json, extracted
# from that sglang wheel). `render` gives the argv and the environment;
# modules/sglang.nix uses it for ExecStart. Whether a configuration is sound
# (the rules of modules/rules.json, the flag table's verdicts, the versions)
# is decided by blackwell_stack.serve alone, which the module runs at build
# time (modules/sglang/check.nix) and which renders the same argv itself.
let
  inherit (builtins)
    all any attrNames concatMap concatStringsSep elem elemAt filter foldl'
    fromJSON genList head isAttrs isBool isFloat isInt isList isString length
    listToAttrs mapAttrs match readDir readFile removeAttrs replaceStrings sort split
    stringLength substring;

  readJSON = path: fromJSON (readFile path);

  hasPrefix = prefix: s: substring 0 (stringLength prefix) s == prefix;

  FIRST = [ "--model-path" "--revision" ];

  # --- the flag table ------------------------------------------------------------------------

  # How SGLang's parser (argparse, allow_abbrev) reads an option string: an
  # exact spelling, an accepted abbreviation, or an ambiguous prefix with the
  # option strings it could mean. Decided when the table was extracted
  # (scripts/sglang-flags/flags_decisions.py) and looked up here.
  canonical = table: option:
    if table.options ? ${option} then { primary = table.options.${option}; candidates = [ ]; }
    else if table.abbreviations ? ${option} then { primary = table.abbreviations.${option}; candidates = [ ]; }
    else { primary = null; candidates = table.ambiguous.${option} or [ ]; };

  # --- values --------------------------------------------------------------------------------

  # A decimal is a string in the data ("0.88": blackwell_stack.data.profile refuses
  # a float, which toString would print as 0.880000), so every value here renders
  # as Python's str() renders it.
  valueStrings = v:
    if isList v then concatMap valueStrings v
    else if isBool v then [ (if v then "true" else "false") ]
    else [ (toString v) ];

  normalizeKey = k: if hasPrefix "--" k then k else "--${k}";

  # --- render --------------------------------------------------------------------------------

  settingsOf = { profile, overrides, table }:
    let
      base =
        [ { name = "--model-path"; value = profile.model.id; } ]
        ++ (if profile.model.revision or null != null then [ { name = "--revision"; value = profile.model.revision; } ] else [ ])
        ++ [
          { name = "--host"; value = profile.service.host; }
          { name = "--port"; value = profile.service.port; }
        ]
        ++ map (name: { inherit name; value = profile.flags.${name}.value; }) (attrNames profile.flags)
        ++ map (k: { name = normalizeKey k; value = overrides.${k}; }) (attrNames overrides);
    in
    foldl'
      (acc: kv:
        let name = let c = (canonical table kv.name).primary; in if c == null then kv.name else c; in
        if kv.value == null then removeAttrs acc [ name ] else acc // { ${name} = kv.value; })
      { }
      base;

  renderArgv = { settings, extraArgs, table }:
    let
      names = filter (n: settings ? ${n}) FIRST
        ++ sort builtins.lessThan (filter (n: !(elem n FIRST)) (attrNames settings));
      one = name:
        let
          value = settings.${name};
          takes = if table.flags ? ${name} then table.flags.${name}.takes_value
            else if isBool value then "none" else "one";
          negations = if table.flags ? ${name} then table.flags.${name}.negations or [ ] else [ ];
        in
        if takes == "none" then
          (if value == true then [ name ]
           else if value == false then (if negations != [ ] then [ (head negations) ] else [ ])
           else [ name ] ++ valueStrings value)
        else [ name ] ++ valueStrings value;
    in
    concatMap one names ++ extraArgs;

  # Whether argparse reads an option string as a --no-X spelling (it stores False).
  negated = table: option: table.negated ? ${option};

  # extraArgs read the way argparse reads them (parse_extra_args in render.py), for the secret-flag check.
  parseExtraArgs = table: args:
    let
      n = length args;
      at = i: elemAt args i;
      isFlag = s: hasPrefix "--" s;
      hasValueAt = i: i < n && !(isFlag (at i));
      go = i: acc:
        if i >= n then acc
        else
          let
            token = at i;
            next = i + 1;
            eqParts = match "([^=]*)=(.*)" token;
            name = if eqParts == null then token else elemAt eqParts 0;
            hasEq = eqParts != null;
            inline = if hasEq then elemAt eqParts 1 else null;
            c = canonical table name;
            entry = table.flags.${c.primary};
            setValue = v: acc // { values = acc.values // { ${c.primary} = v; }; };
          in
          if !(isFlag token) then go next (acc // { stray = acc.stray ++ [ token ]; })
          else if c.primary == null then
            go (if !hasEq && hasValueAt next then next + 1 else next)
              (if c.candidates != [ ] then acc // { ambiguous = acc.ambiguous ++ [ { inherit name; inherit (c) candidates; } ]; }
               else acc // { unknown = acc.unknown ++ [ name ]; })
          else if entry.takes_value == "none" then
            go next ((setValue (!(negated table name))) // (if hasEq then { stray = acc.stray ++ [ token ]; } else { }))
          else if hasEq then go next (setValue inline)
          else if entry.takes_value == "many" then
            let
              count = foldl' (k: j: if k == j - next && hasValueAt j then k + 1 else k) 0 (genList (j: next + j) (n - next));
            in
            go (next + count) (setValue (genList (j: at (next + j)) count))
          else if entry.takes_value == "optional" then
            (if hasValueAt next then go (next + 1) (setValue (at next)) else go next (setValue true))
          else if hasValueAt next then go (next + 1) (setValue (at next))
          else go next ((setValue null) // { stray = acc.stray ++ [ "${name} (no value)" ]; });
    in
    go 0 { values = { }; unknown = [ ]; ambiguous = [ ]; stray = [ ]; };

  # One flag table per SGLang version: modules/sglang-flags/<version>.json.
  flagTablesDir = ../modules/sglang-flags;
  flagTableVersions = sort (a: b: builtins.compareVersions a b < 0)
    (map (f: head (match "(.*)\.json" f)) (filter (f: match ".*\.json" f != null) (attrNames (readDir flagTablesDir))));
  # The same command as flags.extract_command.
  extractCommand = version:
    "pip download sglang==${version} --no-deps --only-binary=:all: --python-version 3.12 "
    + "--platform manylinux_2_34_x86_64 -d . && "
    + "python scripts/sglang-flags/flags_extract.py --wheel sglang-${version}-*.whl --output modules/sglang-flags/${version}.json";
  flagTableFor = version:
    if elem version flagTableVersions then
      let table = readJSON (flagTablesDir + "/${version}.json"); in
      if table.sglang_version == version then table
      else throw "blackwell-stack: modules/sglang-flags/${version}.json holds the flags of sglang ${table.sglang_version}; regenerate it: ${extractCommand version}"
    else
      throw ("blackwell-stack: no SGLang flag table for sglang ${toString version} in modules/sglang-flags "
        + "(tables: ${concatStringsSep ", " flagTableVersions}); extract it from the sglang wheel: ${extractCommand (toString version)}");

  defaultRules = readJSON ../modules/rules.json;
  loadProfile = name: readJSON (../modules/profiles + "/${name}.json");
  profileNames = map (f: head (match "(.*)\.json" f))
    (filter (f: match ".*\.json" f != null) (attrNames (readDir ../modules/profiles)));
in
rec {
  inherit canonical parseExtraArgs;
  inherit flagTableVersions flagTableFor extractCommand;

  rules = defaultRules;
  defaultProfileName = "qwen3.5-397b-a17b-nvfp4-sm120";
  profiles = listToAttrs (map (name: { inherit name; value = loadProfile name; }) profileNames);
  defaultProfile = profiles.${defaultProfileName};
  inherit loadProfile;
  # The flag table of the default profile's SGLang (until a stack passes its version).
  flagTable = flagTableFor defaultProfile.runtime.sglang;

  # The command line and environment of a configuration. overrides:
  # { "attention-backend" = "triton"; ... } (a null value removes a flag);
  # extraArgs: argv words appended last; env: variables on top of the
  # profile's (null removes one); runtime: { sglang; flashinfer; } whose flag
  # table is used (by default the profile's runtime block).
  render =
    { profile ? defaultProfile
    , runtime ? profile.runtime
    , overrides ? { }
    , extraArgs ? [ ]
    , env ? { }
    , table ? flagTableFor runtime.sglang
    }:
    let
      settings = settingsOf { inherit profile overrides table; };
    in
    {
      argv = renderArgv { inherit settings extraArgs table; };
      env = removeAttrs (mapAttrs (_: spec: spec.value) profile.env // env) (filter (k: env.${k} == null) (attrNames env));
      inherit settings;
      parsed = parseExtraArgs table extraArgs;
    };

  # Flags whose value is a secret. In ExecStart it would be world-readable in the
  # Nix store and in /proc/PID/cmdline; services.sglang.apiKeyFile and
  # adminApiKeyFile hand it over as a systemd credential instead.
  secretFlags = [ "--api-key" "--admin-api-key" ];

  # The secret flags a rendered configuration carries, read the way argparse
  # reads them (every allow_abbrev prefix, with or without `=value`, in the
  # settings or in extraArgs), so no spelling walks around the check. An
  # ambiguous abbreviation that could mean one counts too: argparse would
  # refuse it, but its value would already be in the unit.
  # Same as blackwell_stack.serve.secrets.secret_flags_in.
  secretFlagsIn = { rendered, table ? flagTable }:
    let
      candidates = concatMap (a: a.candidates) rendered.parsed.ambiguous
        ++ concatMap (n: (canonical table n).candidates) (attrNames rendered.settings);
      ambiguousMeans = map (o: table.options.${o}) candidates;
    in
    filter (f: rendered.settings ? ${f} || rendered.parsed.values ? ${f} || elem f ambiguousMeans) secretFlags;
}
