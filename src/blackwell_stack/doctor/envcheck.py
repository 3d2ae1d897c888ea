"""Python environment checks: torch, sgl-kernel, flashinfer and sglang as installed.

Everything comes from package metadata (importlib.metadata over the target interpreter's sys.path) and from
reading files; nothing imports torch or a CUDA library, so a broken install is reported instead of crashing, and
a GPU-less host can check an environment too. `--python` names another interpreter (a venv).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from blackwell_stack import inputfiles
from blackwell_stack.data import stack as stack_data
from blackwell_stack.doctor import abi
from blackwell_stack.doctor.checks import FAIL, OK, WARN, Check
from blackwell_stack.errors import StackError
from blackwell_stack.formats import elf, fatbin, linkage, wheelzip
from blackwell_stack.formats.installed import Environment

TARGET_CUDA_MAJOR = 13


def torch_cuda(dist) -> tuple[str | None, int | None, Path | None]:
    """(CUDA version from torch/version.py, CUDA runtime major linked by libc10_cuda.so, torch/lib)."""
    lib = Path(dist.locate_file("torch/lib"))
    cuda_version = None
    version_py = Path(dist.locate_file("torch/version.py"))
    if version_py.is_file():
        text = inputfiles.read_text(version_py, limit=inputfiles.TEXT_FILE_LIMIT, errors="replace")
        m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", text, re.M)
        cuda_version = m.group(1) if m else None
    runtime = None
    c10_cuda = lib / "libc10_cuda.so"
    if c10_cuda.is_file():
        with contextlib.suppress(StackError), wheelzip.map_file(c10_cuda) as buf:
            runtime = linkage.cuda_runtime_major(elf.parse(buf, str(c10_cuda)).needed)
    return cuda_version, runtime, lib if lib.is_dir() else None


def arch_runs_on(arch: str, cc: str, *, ptx: bool) -> bool:
    """Can code for arch run on a GPU of compute capability cc ("12.0")?

    Cubins run on the same major at an equal or newer minor; "a" code only on
    exactly that GPU; "f" code across the family. PTX is compiled by the
    driver for any newer GPU, except "a"/"f" PTX which stays in its family.
    """
    m = re.fullmatch(r"sm_(\d+)([af]?)", arch)
    if not m:
        return False
    n, suffix = int(m.group(1)), m.group(2)
    sm = int(cc.replace(".", ""))
    if suffix == "a":
        return n == sm
    if suffix == "f" or not ptx:
        return n // 10 == sm // 10 and n <= sm
    return n <= sm


def kernel_library_for(cc: str, names: list[str]) -> list[str]:
    """The common_ops library sgl-kernel loads on this GPU (load_utils.py: sm90/ on 9.0, else sm100/)."""
    wanted = "sm90/" if cc == "9.0" else "sm100/"
    picked = [n for n in names if wanted in n and "common_ops" in n]
    return picked or [n for n in names if "common_ops" in n]


def checks(env: Environment, *, gpu_cc: str | None, target_cc: str = "12.0") -> list[Check]:
    out: list[Check] = [Check("python", "interpreter", OK, f"{env.python} ({env.version})")]
    try:
        pin = stack_data.load().versions()["torch"]  # the default stack's
    except StackError as exc:
        out.append(Check("python", "torch pin", FAIL, "unreadable", exc.message, exc.hint))
        pin = "(the pinned version: see the error above)"
    torch = env.get("torch")
    torch_lib = None
    if torch is None:
        out.append(Check("python", "torch", FAIL, "not installed", f"no torch in {env.python}",
                         f"install torch {pin} (or pass --python of the serving venv)"))
    else:
        cuda_version, runtime, torch_lib = torch_cuda(torch)
        value = f"{torch.version} (CUDA {cuda_version or 'none'})"
        if cuda_version is None or torch_lib is None or not (torch_lib / "libc10_cuda.so").is_file():
            out.append(Check("python", "torch", FAIL, value, "a CPU-only torch: no CUDA libraries in torch/lib",
                             f"install the cu130 build: torch {pin}"))
        elif int(cuda_version.split(".")[0]) != TARGET_CUDA_MAJOR or (runtime and runtime != TARGET_CUDA_MAJOR):
            out.append(Check("python", "torch", FAIL, value,
                             f"the stack runs on CUDA {TARGET_CUDA_MAJOR}; this torch is built for CUDA {cuda_version}",
                             f"install torch {pin}"))
        elif torch.version != pin:
            out.append(Check("python", "torch", WARN, value, f"CUDA {cuda_version} as required; the pin is {pin}",
                             f"install torch {pin} for the tested stack"))
        else:
            out.append(Check("python", "torch", OK, value, "the default stack's torch"))
    kernel = env.get("sgl-kernel")
    if kernel is None:
        out.append(Check("python", "sgl-kernel", WARN, "not installed", "sgl-kernel is not installed here",
                         "install the wheel built by `nix build .#sgl-kernel-wheel` or `blackwell-stack kernel build`"))
    else:
        kdir = Path(kernel.locate_file("sgl_kernel"))
        out += [_abi_check(kdir, kernel.version, torch_lib),
                _arch_check(kdir, kernel.version, gpu_cc or target_cc, gpu_cc is None)]
    return [*out, _flashinfer_check(env), _sglang_check(env)]


def _abi_check(kdir: Path, version: str, torch_lib: Path | None) -> Check:
    if torch_lib is None:
        return Check("python", "sgl-kernel ABI", WARN, version, "no torch to check against", None)
    try:
        k = abi.load_kernel(str(kdir))
        result = abi.compare(k, abi.load_torch(str(torch_lib), k))
    except StackError as exc:
        return Check("python", "sgl-kernel ABI", FAIL, version, exc.message, exc.hint)
    if result["ok"]:
        return Check("python", "sgl-kernel ABI", OK, version, f"all {result['resolved']} torch symbols resolve; "
                     f"CUDA runtime {result['kernel']['cuda_runtime']} on both sides")
    first = result["problems"][0]
    detail = first["message"]
    if result["missing"]:
        m = result["missing"][0]
        detail += f"; e.g. missing {m['demangled']}"
        if m["torch_has"]:
            detail += f" (torch has {m['torch_has'][0]['demangled']})"
    return Check("python", "sgl-kernel ABI", FAIL, version, detail, first["fix"])


def _arch_check(kdir: Path, version: str, cc: str, is_target: bool) -> Check:
    where = f"the target GPU (compute capability {cc})" if is_target else f"this GPU (compute capability {cc})"
    source = wheelzip.DirSource(kdir)
    libs = kernel_library_for(cc, [m.name for m in source.elf_members])
    if not libs:
        return Check("python", "sgl-kernel architectures", WARN, version, f"no common_ops library in {kdir}", None)

    missing: list[str] = []
    found: set[str] = set()
    for name in libs:
        try:
            with source.open_elf(name) as e:
                entries = fatbin.fatbin_entries(e)
        except StackError as exc:
            return Check("python", "sgl-kernel architectures", FAIL, version, exc.message,
                         exc.hint or "reinstall sgl-kernel")
        found.update(x.arch for x in entries)
        if not any(arch_runs_on(x.arch, cc, ptx=x.kind == "ptx") for x in entries):
            missing.append(name)
    archs = ", ".join(sorted(found, key=fatbin.arch_sort_key)) or "none"
    if missing:
        return Check("python", "sgl-kernel architectures", FAIL, archs,
                     f"{', '.join(missing)} has no code that runs on {where}",
                     f"rebuild sgl-kernel with sm_{cc.replace('.', '')}a: `blackwell-stack kernel build`")
    return Check("python", "sgl-kernel architectures", OK, archs, f"{', '.join(libs)} has code for {where}")


def _flashinfer_check(env: Environment) -> Check:
    py, cubin = env.get("flashinfer-python"), env.get("flashinfer-cubin")
    if py is None:
        return Check("python", "flashinfer", WARN, "not installed", "flashinfer-python is not installed",
                     "install flashinfer-python and flashinfer-cubin 0.6.5 (the NaN fix of flashinfer PR #2716)")
    if cubin is None:
        return Check("python", "flashinfer", WARN, f"python {py.version}, cubin missing",
                     "without flashinfer-cubin, kernels are downloaded or JIT-compiled at first use",
                     f"install flashinfer-cubin=={py.version}")
    if py.version != cubin.version:
        return Check("python", "flashinfer", FAIL, f"python {py.version} != cubin {cubin.version}",
                     "flashinfer-python and flashinfer-cubin must be the same release",
                     f"install flashinfer-cubin=={py.version}")
    return Check("python", "flashinfer", OK, py.version, "flashinfer-python == flashinfer-cubin")


def _sglang_check(env: Environment) -> Check:
    sg = env.get("sglang")
    if sg is None:
        return Check("python", "sglang", WARN, "not installed", "sglang is not installed here",
                     "install a stack into the venv: `UV_PROJECT_ENVIRONMENT=VENV uv sync --frozen --inexact --project stacks/NAME` "
                     "(`blackwell-stack serve run` needs it; `nix build .#sglang-env` gives the default stack's)")
    notes = []
    for req in sg.requires or []:
        m = re.match(r"^\s*(sgl[-_]kernel|torch|flashinfer[-_]python)\s*==\s*([^\s;,]+)\s*(;.*)?$", req)
        if not m or (m.group(3) and "extra" in m.group(3)):
            continue
        have = env.get(m.group(1))
        if have is not None and have.version != m.group(2):
            notes.append(f"requires {m.group(1)}=={m.group(2)}, found {have.version}")
    if notes:
        return Check("python", "sglang", WARN, sg.version, "; ".join(notes),
                     "expected where a stack overrides sglang's pins on purpose (stable, nightly: each override's reason is in "
                     "stacks/NAME/pyproject.toml); `stack doctor NAME` checks the venv against that stack's lock")
    return Check("python", "sglang", OK, sg.version, "its pinned dependencies match")
