"""A stand-in for SGLang in the NixOS VM test of services.sglang: the import
path `sglang.launch_server` with an OpenAI-compatible HTTP server behind it,
no model, no GPU. See launch_server.py."""
