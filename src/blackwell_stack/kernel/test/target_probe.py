"""Facts about a Python environment, its GPUs and its sgl_kernel package, printed as one JSON object.

`blackwell-stack kernel test` runs this file's text with `python -c` in the interpreter that will run the tests
(with the wheel under test on its path), so it uses the standard library and torch only. It never imports
sgl_kernel: its import loads the kernels, and refuses a GPU the build has none for. The arguments are module names
to look for; each is found (importlib's find_spec) or not, without being imported.
"""

import ast
import importlib.util
import json
import os
import sys


def _build_archs(package_dir):
    """CUDA_ARCHS of _build_archs.py (patch 0005), or None for a build with upstream's list."""
    path = os.path.join(package_dir, "_build_archs.py")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CUDA_ARCHS" for t in node.targets):
            return [str(a) for a in ast.literal_eval(node.value)]
    return None


def _libraries(package_dir):
    """The extension libraries of the package by name: sm90/common_ops.abi3.so -> common_ops."""
    names = set()
    for _dirpath, _dirnames, filenames in os.walk(package_dir):
        names.update(name.split(".", 1)[0] for name in filenames if name.endswith(".so"))
    return sorted(names)


def _found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def main(modules):
    out = {"python": sys.executable, "modules": {name: _found(name) for name in modules}, "sgl_kernel": None}
    spec = importlib.util.find_spec("sgl_kernel")
    if spec is not None and spec.submodule_search_locations:
        package_dir = next(iter(spec.submodule_search_locations))
        out["sgl_kernel"] = {"dir": package_dir, "archs": _build_archs(package_dir), "libraries": _libraries(package_dir)}
    try:
        import torch
    except Exception as exc:  # any import failure: report it, the caller says what to do
        out.update(torch=None, torch_error=f"{type(exc).__name__}: {exc}", gpus=[])
    else:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        gpus = [{"name": torch.cuda.get_device_name(i),
                 "capability": ".".join(map(str, torch.cuda.get_device_capability(i)))} for i in range(count)]
        out.update(torch=torch.__version__, torch_cuda=torch.version.cuda, gpus=gpus)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
