# Version order and version ranges for the rules (builtins only): the same
# steps as blackwell_stack.model.versions, checked against it and against
# Python's packaging by the tests. PEP 440 normal form only (0.5.23, 0.7.0rc1,
# 0.6.5.post1, 2.12.0.dev20260307+cu130, 1!2.0); builtins.compareVersions is
# not used: it puts 1.0 before 1.0rc1.
let
  inherit (builtins)
    elemAt filter fromJSON genList head isList isString length match split stringLength toJSON;

  # Capturing groups only (POSIX ERE); the same string as versions.PATTERN.
  pattern = "(([0-9]+)!)?([0-9]+(\\.[0-9]+)*)((a|b|rc)([0-9]+))?(\\.post([0-9]+))?(\\.dev([0-9]+))?(\\+([a-z0-9]+(\\.[a-z0-9]+)*))?";
  maxDigits = 18; # Nix integers are 64-bit

  splitDots = s: filter isString (split "\\." s);
  min = a: b: if a < b then a else b;
  max = a: b: if a > b then a else b;
  cmp = a: b: if a < b then -1 else if a > b then 1 else 0;

  notNormal = version:
    throw ("blackwell-stack: ${toJSON version} is not a version in PEP 440 normal form; "
      + "write it as pip and uv do: 0.5.23, 0.7.0rc1, 0.6.5.post1, 2.12.0.dev20260307+cu130");

  toInt = version: digits:
    if stringLength digits > maxDigits then
      throw "blackwell-stack: version ${toJSON version}: the number ${digits} has more than ${toString maxDigits} digits"
    else fromJSON (head (match "0*([0-9]+)" digits)); # fromJSON refuses leading zeros

  preRank = { a = 0; b = 1; rc = 2; };

  # { epoch; release; pre; post; dev; local; } as in versions.parse.
  parse = version:
    let
      m = if isString version then match pattern version else null;
      g = i: elemAt m i;
      int = toInt version;
    in
    if m == null then notNormal version
    else {
      epoch = if g 1 == null then 0 else int (g 1);
      release = map int (splitDots (g 2));
      pre =
        if g 5 != null then [ preRank.${g 5} (int (g 6)) ]
        else if g 8 == null && g 10 != null then [ (-1) 0 ] # 1.0.dev1 sorts before 1.0a1
        else [ 3 0 ];
      post = if g 8 == null then [ (-1) ] else [ (int (g 8)) ];
      dev = if g 10 == null then [ 1 0 ] else [ 0 (int (g 10)) ];
      local =
        if g 12 == null then [ ]
        else map (p: if match "[0-9]+" p != null then [ 1 (int p) ] else [ 0 p ]) (splitDots (g 12));
    };

  cmpRelease = a: b:
    let
      n = max (length a) (length b);
      at = l: i: if i < length l then elemAt l i else 0;
      go = i: if i >= n then 0 else let c = cmp (at a i) (at b i); in if c != 0 then c else go (i + 1);
    in
    go 0;

  # Element by element (ints, or [tag value] pairs), stopping at the first
  # difference so that a number is never compared with a string.
  cmpList = a: b:
    let
      n = min (length a) (length b);
      go = i:
        if i >= n then cmp (length a) (length b)
        else
          let
            x = elemAt a i;
            y = elemAt b i;
            c = if isList x then cmpList x y else cmp x y;
          in
          if c != 0 then c else go (i + 1);
    in
    go 0;

  compare = a: b:
    let
      ka = parse a;
      kb = parse b;
      steps = [
        (_: cmp ka.epoch kb.epoch)
        (_: cmpRelease ka.release kb.release)
        (_: cmpList ka.pre kb.pre)
        (_: cmpList ka.post kb.post)
        (_: cmpList ka.dev kb.dev)
        (_: cmpList ka.local kb.local)
      ];
      go = i: if i >= length steps then 0 else let c = (elemAt steps i) null; in if c != 0 then c else go (i + 1);
    in
    go 0;

  inRange = version: r:
    (!(r ? min) || compare version r.min >= 0)
    && (!(r ? max) || compare version r.max <= 0)
    && (!(r ? below) || compare version r.below < 0);

  showRange = r:
    if r ? min && r ? max then (if r.min == r.max then r.min else "${r.min}..${r.max}")
    else
      builtins.concatStringsSep "," (
        (if r ? min then [ ">=${r.min}" ] else [ ])
        ++ (if r ? max then [ "<=${r.max}" ] else [ ])
        ++ (if r ? below then [ "<${r.below}" ] else [ ]));

  showRanges = ranges: if ranges == [ ] then "none" else builtins.concatStringsSep ", " (map showRange ranges);
in
{
  inherit pattern parse compare inRange showRange showRanges;
}
