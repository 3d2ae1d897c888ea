"""kernel: sgl-kernel for SM120, built from source (each sub-package says what it holds).

Other areas may use the modules in __all__ (the test of the import graph holds them to it).
"""

__all__ = ["inputs", "jobs", "reproducibility"]
