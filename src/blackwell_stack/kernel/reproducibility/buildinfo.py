"""The build record installed in the wheel as sgl_kernel/_build_info.json (patch 0009).

What went into the wheel, in a form that is itself reproducible: the
recipe's fixed settings, the architectures, the patch series by hash, the
sources by pin and by the NAR hash of what was compiled, the torch compiled
against and the option that chose it when it is not the pinned one, and the
tool versions. No paths, no times, no host figures, no job plan: two builds
of the same inputs write the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from blackwell_stack.hashes import sha256_file
from blackwell_stack.kernel.inputs import patch_series

SCHEMA_VERSION = 1
FILE_NAME = "sgl-kernel-build-info.json"


def patch_digests(series: list[patch_series.Patch]) -> list[dict[str, str]]:
    return [{"name": p.name, "sha256": sha256_file(p.path)} for p in series]


def render(
    *,
    sgl_kernel_version: str | None,
    sglang_pin: Mapping[str, Any],
    cuda_archs: str,
    defines: Mapping[str, str],
    environment: Mapping[str, str],
    series: list[patch_series.Patch],
    sources: Mapping[str, Any],
    torch: Mapping[str, Any],
    toolchain: Mapping[str, str],
) -> str:
    """The record as JSON text (sorted keys, one trailing newline)."""
    record = {
        "schema_version": SCHEMA_VERSION,
        "written_by": "blackwell-stack kernel build",
        "sgl_kernel_version": sgl_kernel_version,
        "sglang": {"tag": sglang_pin.get("tag"), "rev": sglang_pin.get("rev")},
        "cuda_archs": cuda_archs,
        "cmake_defines": dict(defines),
        "environment": dict(environment),
        "patches": patch_digests(series),
        "sources": dict(sources),
        "torch": dict(torch),
        "toolchain": dict(toolchain),
    }
    return dumps(record)


def dumps(record: Mapping[str, Any]) -> str:
    """A record as the wheel carries it: sorted keys, indented, one trailing newline."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
