"""serve: the SGLang service of a profile on a runtime (render, rules, secrets, the flag tables and their
extractor), the NixOS module's build-time check (module_check), and the scripts its unit runs (launcher,
readiness)."""
