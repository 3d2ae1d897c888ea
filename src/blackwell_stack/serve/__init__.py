"""serve: the SGLang service of a profile on a runtime (render, rules, secrets, the flag tables and their
extractor), the NixOS module's build-time check (module_check), and the scripts its unit runs (launcher,
readiness)."""

# Other areas may use these (the test of the import graph holds them to it): the acceptance run (verify) starts
# the service and waits for it as the unit does.
__all__ = ["readiness", "service"]
