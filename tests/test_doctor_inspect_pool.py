"""`inspect` reads large inputs in worker processes: they must start wherever $TMPDIR is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

# Two real ELF libraries: extension modules of this Python's standard library (DESTSHARED: the base
# installation's lib-dynload, also from a venv).
_LIBRARIES = sorted(Path(sysconfig.get_config_var("DESTSHARED") or "/nonexistent").glob("*.so"))[:2]

_PROBE = """
import json, sys
from blackwell_stack.doctor import inspection
inspection._PARALLEL_THRESHOLD = 0  # use the pool for these small files
report = inspection.inspect_path(sys.argv[1], jobs=2)
print(json.dumps({"files": len(report["files"]), "errors": report["errors"]}))
"""


def test_the_worker_pool_starts_under_a_long_tmpdir(tmp_path):
    if len(_LIBRARIES) < 2:
        pytest.skip("this Python has no lib-dynload extension modules to inspect")
    libs = tmp_path / "libs"
    libs.mkdir()
    for i, lib in enumerate(_LIBRARIES):
        shutil.copy(lib, libs / f"lib{i}.so")
    # 110 characters: a socket under it (the forkserver's) is past the AF_UNIX limit of 107 bytes.
    long_tmp = tmp_path / ("t" * max(1, 110 - len(str(tmp_path)) - 1))
    long_tmp.mkdir()
    result = subprocess.run([sys.executable, "-c", _PROBE, str(libs)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TMPDIR": str(long_tmp)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"files": 2, "errors": []}
