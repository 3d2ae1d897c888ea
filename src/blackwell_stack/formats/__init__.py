"""Readers of file formats, with no knowledge of the project: ELF, CUDA fat binaries, wheels (zip members, RECORD, remote range reads, member-by-member diffs), C++ names, and
the distributions installed in a Python environment. Any area may use them."""
