"""`kernel build` without Nix: the toolchain and compilers it checks, the fixed stage, the plan and the build."""
