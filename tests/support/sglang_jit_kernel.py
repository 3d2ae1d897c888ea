"""Build and load SGLang's JIT KV-cache kernel with SGLang's own code, and say whether it loaded.

Run by the Nix rehearsal (tests/test_rehearsal_cuda_home.py) with the stack's
Python, PYTHONPATH holding sglang, apache-tvm-ffi and torch, and CUDA_HOME, CC
and CXX set as the environment sets them. SGLang's memory pool builds this
module on its first KV-cache write (sglang/srt/mem_cache/memory_pool.py,
can_use_store_cache), through tvm-ffi's load_inline, which passes nvcc no CUDA
include directory. sglang/__init__.py imports the whole server, so the two
packages are entered without running their __init__; jit_kernel/utils.py and
kvcache.py run as shipped. There is no GPU here: only the device query SGLang
makes for the architecture (torch.cuda.get_device_capability) answers as the
target's GPU would, (12, 0).

usage: python sglang_jit_kernel.py SITE_PACKAGES   # prints {"store_cache": true} (the module under TVM_FFI_CACHE_DIR)
"""

import json
import sys
import types
from pathlib import Path

import torch

site = Path(sys.argv[1])
for name, path in (("sglang", site / "sglang"), ("sglang.jit_kernel", site / "sglang" / "jit_kernel")):
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    sys.modules[name] = package
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_capability = lambda device=None: (12, 0)

from sglang.jit_kernel import kvcache  # noqa: E402  (after the package stand-ins above)

ROW_BYTES = 2 * 128 * 2  # two KV heads of 128 bf16 values per token
module = kvcache._jit_kvcache_module(ROW_BYTES)
print(json.dumps({"store_cache": callable(module.store_cache)}))
