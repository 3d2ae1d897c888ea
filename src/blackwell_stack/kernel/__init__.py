"""kernel: sgl-kernel for SM120, built from source (recipe, patches, sources, build, reference wheel).

Other areas may use the modules in __all__ (the test of the import graph holds them to it).
"""

__all__ = ["jobs", "recipe", "reference", "sources"]
