"""serve: the SGLang service of a profile on a runtime (render, rules, secrets, the flag tables and their
extractor), the same steps as lib/sglang-service.nix, and the scripts the NixOS unit runs (launcher, readiness)."""
