"""Write the ninja file of flashinfer's JIT norm module with flashinfer's own code, and print where it is.

Run by the Nix rehearsal (tests/test_rehearsal_cuda_home.py) with the stack's
Python, PYTHONPATH holding flashinfer, apache-tvm-ffi and torch, and CUDA_HOME,
CC and FLASHINFER_CUDA_ARCH_LIST set as the environment sets them.
flashinfer/__init__.py imports every operator (and the whole serving stack
with them), so the two packages the JIT code lives in are entered without
running their __init__; every module the flags come from (jit/core.py,
jit/cpp_ext.py, jit/env.py, compilation_context.py) runs as shipped.

usage: python flashinfer_jit_ninja.py SITE_PACKAGES   # prints {"ninja": PATH}
"""

import json
import sys
import types
from pathlib import Path

site = Path(sys.argv[1])
for name, path in (("flashinfer", site / "flashinfer"), ("flashinfer.jit", site / "flashinfer" / "jit")):
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    sys.modules[name] = package

from flashinfer.jit import norm  # noqa: E402  (after the package stand-ins above)

spec = norm.gen_norm_module()
spec.write_ninja()
print(json.dumps({"ninja": str(spec.ninja_path)}))
