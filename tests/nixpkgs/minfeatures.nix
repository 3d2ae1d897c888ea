# The stand-in nixpkgs' floor: none, since it runs on the Nix the tests have
# (nixpkgs' own lib/minfeatures.nix asks for 2.18; tests/support/flake_eval.py puts this
# file in its place, tests/test_nix_floor.py the real one).
{
  all = [ ];
  supported = [ ];
  missing = [ ];
}
