# The SGLang service as pure functions over JSON data (builtins only): the
# profile (modules/profiles/*.json), the rules (modules/rules.json) and the
# flag table of the runtime's SGLang version (modules/sglang-flags/<version>.json,
# extracted from that sglang wheel). `render` gives the argv, the environment
# and every rule's verdict for a runtime (the SGLang and flashinfer versions:
# the profile's runtime block unless a stack passes its own); modules/sglang.nix
# uses it for ExecStart and assertions, and tests compare it with
# blackwell_stack.serve (render.py, rules.py), which implements the same steps
# in the same order.
let
  inherit (builtins)
    all any attrNames concatMap concatStringsSep elem elemAt filter foldl'
    fromJSON genList head isAttrs isBool isFloat isInt isList isString length
    listToAttrs mapAttrs match readDir readFile removeAttrs replaceStrings sort split
    stringLength substring;

  versions = import ./versions.nix;

  readJSON = path: fromJSON (readFile path);

  hasPrefix = prefix: s: substring 0 (stringLength prefix) s == prefix;
  stripDashes = s: head (match "-*(.*)" s);
  splitDots = s: filter isString (split "\\." s);
  firstOr = default: list: if list == [ ] then default else head list;
  firstNonNull = list: firstOr null (filter (x: x != null) list);
  isNumber = v: isInt v || isFloat v;
  # Same pattern as render.py's _INT_RE: no leading zeros, so fromJSON accepts it.
  intPattern = "-?(0|[1-9][0-9]*)";
  isIntString = v: isString v && match intPattern v != null;
  # A JSON number (render.py's _NUMBER_RE): what fromJSON reads, as json.loads does there; no nan or inf.
  numberPattern = "-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?";
  isNumberString = v: isString v && match numberPattern v != null;
  min = a: b: if a < b then a else b;
  max = a: b: if a > b then a else b;
  abs = a: if a < 0 then -a else a;

  FIRST = [ "--model-path" "--revision" ];

  # --- the flag table ------------------------------------------------------------------------

  # How SGLang's parser (argparse, allow_abbrev) reads an option string: an
  # exact spelling, an accepted abbreviation, or an ambiguous prefix with the
  # option strings it could mean. Decided when the table was extracted
  # (blackwell_stack.serve.flags_decisions) and looked up here.
  canonical = table: option:
    if table.options ? ${option} then { primary = table.options.${option}; candidates = [ ]; }
    else if table.abbreviations ? ${option} then { primary = table.abbreviations.${option}; candidates = [ ]; }
    else { primary = null; candidates = table.ambiguous.${option} or [ ]; };

  chars = s: genList (i: substring i 1 s) (stringLength s);

  levenshtein = a: b:
    let
      ca = chars a;
      cb = chars b;
      lb = length cb;
      row = prev: i: x:
        (foldl'
          (acc: j:
            let
              cost = if x == elemAt cb (j - 1) then 0 else 1;
              v = min (min (elemAt prev j + 1) (acc.left + 1)) (elemAt prev (j - 1) + cost);
            in { left = v; cells = acc.cells ++ [ v ]; })
          { left = i; cells = [ i ]; }
          (genList (j: j + 1) lb)).cells;
      final = foldl' (acc: x: { i = acc.i + 1; prev = row acc.prev (acc.i + 1) x; })
        { i = 0; prev = genList (j: j) (lb + 1); } ca;
    in elemAt final.prev lb;

  # The flag a misspelling most likely meant (same algorithm as flags.suggest):
  # an option whose dest is what was typed, else the nearest spelling within a
  # third of its length.
  suggest = table: option:
    let
      wanted = replaceStrings [ "-" ] [ "_" ] (stripDashes option);
      byDest = filter (n: table.flags.${n}.dest == wanted) (sort builtins.lessThan (attrNames table.flags));
      bare = stripDashes option;
      limit = max 1 (stringLength bare / 3);
      nearest = foldl'
        (best: name:
          let candidate = stripDashes name; in
          if abs (stringLength candidate - stringLength bare) > limit then best
          else
            let d = levenshtein bare candidate; in
            if d <= limit && (best == null || d < best.d) then { inherit d name; } else best)
        null
        (sort builtins.lessThan (attrNames table.options));
    in
    if byDest != [ ] then head byDest else if nearest == null then null else nearest.name;

  # --- values --------------------------------------------------------------------------------

  show = v:
    if v == null then "null"
    else if isBool v then (if v then "true" else "false")
    else if isList v then concatStringsSep ", " (map show v)
    else toString v;

  valueStrings = v:
    if isList v then concatMap valueStrings v
    else if isBool v then [ (if v then "true" else "false") ]
    else [ (toString v) ];

  typed = entry: value:
    if entry.type or null == "int" && isIntString value then fromJSON value
    else if entry.type or null == "float" && isNumberString value then fromJSON value
    else value;

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

  # extraArgs read the way argparse reads them (parse_extra_args in render.py).
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
          else if hasEq then go next (setValue (typed entry inline))
          else if entry.takes_value == "many" then
            let
              count = foldl' (k: j: if k == j - next && hasValueAt j then k + 1 else k) 0 (genList (j: next + j) (n - next));
            in
            go (next + count) (setValue (genList (j: at (next + j)) count))
          else if entry.takes_value == "optional" then
            (if hasValueAt next then go (next + 1) (setValue (typed entry (at next))) else go next (setValue true))
          else if hasValueAt next then go (next + 1) (setValue (typed entry (at next)))
          else go next ((setValue null) // { stray = acc.stray ++ [ "${name} (no value)" ]; });
    in
    go 0 { values = { }; unknown = [ ]; ambiguous = [ ]; stray = [ ]; };

  contextOf = { profile, settings, parsed, rules, table, runtime }:
    let
      byPrimary = mapAttrs (_: e: e.default) table.flags // settings // parsed.values;
      # Every alias reads its flag's value: a rule may name either spelling.
      aliases = listToAttrs (concatMap
        (name: map (alias: { name = alias; value = byPrimary.${name}; }) table.flags.${name}.aliases)
        (attrNames table.flags));
      flags = byPrimary // aliases;
      modelPath = flags."--model-path" or null;
    in
    {
      inherit flags;
      inherit (profile) hardware;
      model = profile.model // { local = isString modelPath && hasPrefix "/" modelPath; };
      runtime = { sglang = runtime.sglang; flashinfer = runtime.flashinfer or null; };
      constants = rules.constants or { };
    };

  # --- rules ---------------------------------------------------------------------------------

  lookup = ctx: path: foldl' (v: k: if isAttrs v && v ? ${k} then v.${k} else null) ctx path;

  operand = ctx: node:
    if isAttrs node then
      (if node ? var then lookup ctx node.var
       else if node ? mul then
         let a = operand ctx (elemAt node.mul 0); b = operand ctx (elemAt node.mul 1); in
         if isNumber a && isNumber b then a * b else null
       else throw "blackwell-stack: modules/rules.json: unknown operand ${builtins.toJSON node}")
    else node;

  holds = ctx: cond:
    let
      op = head (attrNames cond);
      arg = cond.${op};
      a = operand ctx (elemAt arg 0);
      b = operand ctx (elemAt arg 1);
    in
    if op == "all" then all (holds ctx) arg
    else if op == "any" then any (holds ctx) arg
    else if op == "not" then !(holds ctx arg)
    else if op == "in" then any (x: a == x) (elemAt arg 1)
    else if op == "eq" then a == b
    else if op == "ne" then a != b
    else if op == "gt" then isNumber a && isNumber b && a > b
    else if op == "lt" then isNumber a && isNumber b && a < b
    else if op == "version_lt" then isString a && isString b && versions.compare a b < 0
    else throw "blackwell-stack: modules/rules.json: unknown condition ${op}";

  interpolate = ctx: message:
    concatStringsSep "" (map (p: if isList p then show (lookup ctx (splitDots (head p))) else p)
      (split "[{]([A-Za-z0-9_.-]+)[}]" message));

  valueProblem = name: value: entry:
    if entry.takes_value == "none" then
      (if isBool value then null else "${name} is a switch and takes no value (got ${show value})")
    else
      firstNonNull (map
        (v:
          if v == null then "${name} needs a value"
          else if entry.choices != null && !(any (c: show v == show c) entry.choices) then
            "${name} ${show v} is not one of the pinned SGLang's choices: ${show entry.choices}"
          else if entry.type == "int" && !(isInt v || isIntString v) then
            "${name} expects an integer, got ${show v}"
          else null)
        (if isList value then value else [ value ]));

  unknownFlag = table: where: name:
    let hint = suggest table name; in
    "${where}: sglang ${table.sglang_version} has no flag ${name}"
    + (if hint != null then "; did you mean ${hint}?" else "; see modules/sglang-flags/${table.sglang_version}.json");

  flagTableProblems = { settings, parsed, table }:
    let
      fromSettings = concatMap
        (name:
          let c = canonical table name; in
          if c.primary == null then
            (if c.candidates != [ ] then
              [ "settings: ${name} is ambiguous in sglang ${table.sglang_version}: ${concatStringsSep ", " c.candidates}" ]
            else [ (unknownFlag table "settings" name) ])
          else
            let p = valueProblem name settings.${name} table.flags.${c.primary}; in
            if p == null then [ ] else [ "settings: ${p}" ])
        (sort builtins.lessThan (attrNames settings));
    in
    fromSettings
    ++ map (unknownFlag table "extraArgs") parsed.unknown
    ++ map (a: "extraArgs: ${a.name} is ambiguous in sglang ${table.sglang_version}: ${concatStringsSep ", " a.candidates}") parsed.ambiguous
    ++ map (t: "extraArgs: ${t} is not a flag and follows no flag that takes a value") parsed.stray
    ++ concatMap
      (name: let p = valueProblem name parsed.values.${name} table.flags.${name}; in if p == null then [ ] else [ "extraArgs: ${p}" ])
      (sort builtins.lessThan (attrNames parsed.values));

  # Whether a rule holds for the runtime's versions (rules.applicability):
  # "yes", "no" (outside the versions it holds for) or "unknown".
  applicability = rule: runtime:
    let
      spec = rule.versions or { };
      status = component:
        let
          held = spec.${component}.holds or [ ];
          notHeld = spec.${component}.not or [ ];
          version = runtime.${component} or null;
        in
        if !(isString version) then
          { kind = "unknown"; text = "the ${component} version is not known (holds for ${component} ${versions.showRanges held})"; }
        else if any (versions.inRange version) held then { kind = "yes"; }
        else if any (versions.inRange version) notHeld then
          { kind = "no"; text = "${component} ${version} (it holds for ${component} ${versions.showRanges held})"; }
        else {
          kind = "unknown";
          text = "not checked for ${component} ${version} (holds for ${versions.showRanges held}; "
            + "does not hold for ${versions.showRanges notHeld})";
        };
      statuses = map status (attrNames spec);
      texts = kind: map (s: s.text) (filter (s: s.kind == kind) statuses);
    in
    if texts "no" != [ ] then { applies = "no"; note = "does not apply to " + concatStringsSep "; " (texts "no"); }
    else if texts "unknown" != [ ] then { applies = "unknown"; note = concatStringsSep "; " (texts "unknown"); }
    else { applies = "yes"; note = null; };

  evaluateRules = { rules, context, settings, parsed, table }:
    map
      (rule:
        let
          a = applicability rule context.runtime;
          raw =
            if a.applies == "no" then [ ]
            else if (rule.check or null) == "flag_table" then flagTableProblems { inherit settings parsed table; }
            else if rule ? condition then
              (if holds context rule.condition then [ (interpolate context rule.message) ] else [ ])
            else throw "blackwell-stack: modules/rules.json: rule ${rule.id} has neither condition nor a known check";
          # A rule of unknown truth for this version warns, never refuses.
          unknownFired = a.applies == "unknown" && raw != [ ];
          messages = if unknownFired then map (m: "(truth unknown: ${a.note}) ${m}") raw else raw;
        in
        {
          inherit (rule) id;
          severity = if unknownFired then "warning" else rule.severity;
          fired = messages != [ ];
          inherit messages;
          option = rule.option or null;
          source = rule.source or null;
          fix = rule.fix or null;
          inherit (a) applies note;
        })
      rules.rules;

  # One flag table per SGLang version: modules/sglang-flags/<version>.json.
  flagTablesDir = ../modules/sglang-flags;
  flagTableVersions = sort (a: b: versions.compare a b < 0)
    (map (f: head (match "(.*)\.json" f)) (filter (f: match ".*\.json" f != null) (attrNames (readDir flagTablesDir))));
  # The same command as flags.extract_command.
  extractCommand = version:
    "pip download sglang==${version} --no-deps --only-binary=:all: --python-version 3.12 "
    + "--platform manylinux_2_34_x86_64 -d . && "
    + "blackwell-stack serve flags extract --wheel sglang-${version}-*.whl --output modules/sglang-flags/${version}.json";
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
  inherit canonical suggest levenshtein holds interpolate parseExtraArgs show applicability versions;
  inherit flagTableVersions flagTableFor extractCommand;

  rules = defaultRules;
  defaultProfileName = "qwen3.5-397b-a17b-nvfp4-sm120";
  profiles = listToAttrs (map (name: { inherit name; value = loadProfile name; }) profileNames);
  defaultProfile = profiles.${defaultProfileName};
  inherit loadProfile;
  # The flag table of the default profile's SGLang (until a stack passes its version).
  flagTable = flagTableFor defaultProfile.runtime.sglang;

  # The whole configuration: argv, environment, the rule context and verdicts.
  # overrides: { "attention-backend" = "triton"; ... } (a null value removes a
  # flag); extraArgs: argv words appended last; env: variables on top of the
  # profile's (null removes one); runtime: { sglang; flashinfer; } the versions
  # the rules hold against and whose flag table is used (a stack passes the
  # versions of its lock; by default the profile's runtime block).
  render =
    { profile ? defaultProfile
    , runtime ? profile.runtime
    , overrides ? { }
    , extraArgs ? [ ]
    , env ? { }
    , table ? flagTableFor runtime.sglang
    , rules ? defaultRules
    }:
    let
      settings = settingsOf { inherit profile overrides table; };
      parsed = parseExtraArgs table extraArgs;
      context = contextOf { inherit profile settings parsed rules table runtime; };
      verdicts = evaluateRules { inherit rules context settings parsed table; };
      fired = severity: filter (v: v.fired && v.severity == severity) verdicts;
    in
    {
      argv = renderArgv { inherit settings extraArgs table; };
      env = removeAttrs (mapAttrs (_: spec: spec.value) profile.env // env) (filter (k: env.${k} == null) (attrNames env));
      inherit settings parsed context verdicts;
      errors = fired "error";
      warnings = fired "warning";
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

  # Text for a NixOS assertion/warning: the rule, what fired, and its source.
  verdictText = v: "${if v.option or null != null then v.option else "services.sglang"}: [${v.id}] "
    + concatStringsSep "; " v.messages + (if v.source != null then " (source: ${v.source})" else "");
}
