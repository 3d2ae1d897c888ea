"""The build record installed in the wheel as sgl_kernel/_build_info.json (patch 0009).

What went into the wheel, in a form that is itself reproducible: the recipe's fixed settings, the architectures, the
patch series by hash, the sources by pin and by the NAR hash of what was compiled, the torch compiled against and
the option that chose it when it is not the pinned one, and the tool versions. No paths, no times, no host figures,
no job plan: two builds of the same inputs write the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from blackwell_stack.hashes import sha256_file
from blackwell_stack.kernel.inputs import patch_series, recipe, sources

SCHEMA_VERSION = 1
FILE_NAME = "sgl-kernel-build-info.json"


def render(rec: Mapping[str, Any], arch: str, *, sglang_pin: Mapping[str, Any], series: list[patch_series.Patch],
           **fields: Any) -> str:
    """The record of a build of recipe `rec` for `arch`, as JSON text: the recipe's fixed defines and environment,
    the sglang pin's tag and rev, every patch by sha256, and `fields` (sgl_kernel_version, sources, torch,
    toolchain)."""
    return dumps({
        "schema_version": SCHEMA_VERSION,
        "written_by": "blackwell-stack kernel build",
        "cuda_archs": arch,
        "cmake_defines": recipe.defines(rec, arch),
        "environment": recipe.environment(rec, arch),
        "sglang": {"tag": sglang_pin.get("tag"), "rev": sglang_pin.get("rev")},
        "patches": [{"name": p.name, "sha256": sha256_file(p.path)} for p in series],
        **fields,
    })


def source_pin(pin: sources.Pin, found: str | None, accepted_mismatch: bool) -> dict[str, Any]:
    """A source's entry in the record's sources.pins: its pin, and the NAR hash of the tree compiled."""
    return {"rev": pin.entry.get("rev"), "pinned_hash": pin.expected, "hash": found,
            "accepted_mismatch": accepted_mismatch}


def dumps(record: Mapping[str, Any]) -> str:
    """A record as the wheel carries it: sorted keys, indented, one trailing newline."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
