"""The Nix rehearsal: each Nix build and run step, on a machine without nixpkgs.

nixpkgs cannot be fetched everywhere this project is tested, so no output of
the flake is built there. But NVIDIA publishes each CUDA component nixpkgs
unpacks (cudaPackages_13_0) as a PyPI wheel made from the same archive, and
nvcc and CMake need no GPU. So each step is rehearsed with exactly the inputs
its Nix code lists (evaluated with the real `nix`), laid out as nixpkgs lays
them out:

  components  the CUDA components and tool stand-ins, as data (cuda-13.0.2.json, tools.json beside them)
  wheels      members of PyPI wheels, range-read into the user cache
  layout      a component's outputs in nixpkgs' layout, from its wheel
  stdenv      what stdenv and its setup hooks make of a derivation's inputs:
              symlinkJoin, the propagated closure, CMAKE_PREFIX_PATH and the
              compiler wrapper's flags
  pythonenv   a Python package set as pyproject.nix builds one: one
              site-packages per package, joined by PYTHONPATH
  autopatchelf  the RUNPATHs nixpkgs' autoPatchelf writes into them, and a
              loader check of each file's own RUNPATH
  diagnose    for a failure, the missing file, the component that has it and
              the Nix input that should list it

docs/nix-rehearsal.md says what each rehearsal shows and what only a real
Nix build can.
"""
