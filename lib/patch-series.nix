# A directory's patch series: its *.patch files, sorted by name (they are
# numbered), as paths. Builtins only, like the rest of lib/.
dir:
map (name: dir + "/${name}") (
  builtins.sort builtins.lessThan (
    builtins.filter (name: builtins.match ".*\\.patch" name != null) (builtins.attrNames (builtins.readDir dir))
  )
)
