"""kernel: sgl-kernel for SM120, built from source.

    inputs/           what a build reads: the recipe, the source pins and a directory of them, the patch series
    build/            `kernel build` without Nix: the toolchain and compilers, the stage, the plan, the build
    reproducibility/  the build record in the wheel, the conditions it does not name, the reference wheel
    test/             `kernel test`: upstream's kernel tests on this host's GPU
    jobs.py           the memory-safe job plan, also run by the Nix derivation as a bare script

Other areas may use the modules in __all__, through the sub-packages listed there (the test of the import
graph holds them to it).
"""

__all__ = ["inputs", "jobs", "reproducibility"]
