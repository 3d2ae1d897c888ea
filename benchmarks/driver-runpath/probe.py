"""Inside the namespace: does torch find the driver, does one CUDA op run, does a flashinfer JIT module
build, load and compute, and does NVML load? One JSON line each; where libcuda.so.1 was loaded from."""

import json
import os
import sys


def say(**fields):
    print(json.dumps(fields), flush=True)


def loaded(prefix):
    with open("/proc/self/maps") as fh:
        return sorted({line.split()[-1] for line in fh if "/" + prefix in line})


import torch  # noqa: E402

say(step="import torch", torch=torch.__version__, file=torch.__file__)
available = torch.cuda.is_available()
say(step="torch.cuda.is_available()", ok=available, libcuda=loaded("libcuda.so"))
if not available:
    sys.exit(1)
x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
say(step="one CUDA op", ok=bool((x * 2).sum().item() == float((1 << 20) * ((1 << 20) - 1))), device=torch.cuda.get_device_name())
try:
    import flashinfer

    h = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    out = flashinfer.norm.rmsnorm(h, w)
    ref = (h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
    err = (out.float() - ref.float()).abs().max().item()
    say(step="flashinfer rmsnorm (JIT)", ok=err < 0.1, max_abs_error=err, flashinfer=flashinfer.__version__,
        cuda_home=os.environ.get("CUDA_HOME"), jit_modules=loaded("norm"), libcudart=loaded("libcudart.so"))
except Exception as exc:  # reported, not raised: the next step still runs
    say(step="flashinfer rmsnorm (JIT)", ok=False, error=f"{type(exc).__name__}: {exc}"[:800])
try:
    import pynvml

    pynvml.nvmlInit()
    say(step="NVML (pynvml)", ok=True, driver=str(pynvml.nvmlSystemGetDriverVersion()), libnvidia_ml=loaded("libnvidia-ml"))
except Exception as exc:
    say(step="NVML (pynvml)", ok=False, error=f"{type(exc).__name__}: {exc}"[:400])
