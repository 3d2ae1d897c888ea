"""A rehearsal's failure, explained: the file a compiler or linker could not find, and who has it.

For `fatal error: X: No such file or directory` and `cannot find -lX`, every
CUDA component of the rehearsal data is searched (laid out as nixpkgs lays it
out) for include/X or lib/libX.so, and the answer names the component and
output that has it, so that a failure says which input the Nix code lacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from support.rehearsal.layout import CudaTree

_HEADER = re.compile(r"fatal error: ([^\s:]+): No such file or directory")
_LIBRARY = re.compile(r"cannot find -l(\S+?)(?::|\s|$)")


@dataclass(frozen=True)
class Missing:
    wanted: str  # a header path (crt/host_config.h) or a library (-lcublas)
    providers: tuple[str, ...]  # "component.output" holding it

    def explain(self, nix_file: str) -> str:
        if not self.providers:
            return f"{self.wanted}: no CUDA component of the rehearsal data has it"
        return (f"{self.wanted} is in cudaPackages_13_0.{' and '.join(self.providers)}, "
                f"which {nix_file} does not give this step")


def missing_files(output: str, tree: CudaTree) -> list[Missing]:
    """Each header or library the output says was not found, with the components that have it."""
    found = []
    for wanted, relative in ([(m, f"include/{m}") for m in _HEADER.findall(output)]
                             + [(f"-l{m}", f"lib/lib{m}.so") for m in _LIBRARY.findall(output)]):
        providers = []
        for name in sorted(tree.components):
            for output_name, directory in tree.outputs(name).items():
                if (directory / relative).exists():
                    providers.append(f"{name}.{output_name}")
        found.append(Missing(wanted, tuple(providers)))
    return found


def explain(output: str, tree: CudaTree, nix_file: str) -> str:
    """A paragraph naming every missing file's component, or '' when the output names none."""
    return "\n".join(m.explain(nix_file) for m in missing_files(output, tree))
