"""What a kernel build reads: its recipe, its source pins and a directory of them, and the patch series."""

__all__ = ["recipe", "sources"]
