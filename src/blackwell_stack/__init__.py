"""blackwell-stack: the helper CLI around the blackwell-stack Nix flake."""

__version__ = "0.1.0"
