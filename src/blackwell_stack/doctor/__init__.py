"""doctor: checks of a host and a Python environment (`doctor`, `doctor abi`), `inspect` and `wheel diff`."""
