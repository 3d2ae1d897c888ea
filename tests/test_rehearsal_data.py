"""The rehearsal's data and its nixpkgs model (docs/nix-rehearsal.md).

tests/support/rehearsal/cuda-13.0.2.json: every wheel is PyPI's file with PyPI's sha256
and size, at the component's CUDA 13.0.2 version; tools.json: the Python build
system is what build-system-pkgs' lock (at the flake's revision) gives the
stack's set. The layout and stdenv models on their own: buildRedist's output
split, the package files' moves, setup.sh's propagation order.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from support import nix_inputs
from support.rehearsal import components, layout, stdenv

from blackwell_stack import pypi
from blackwell_stack.errors import DataError

COMPONENTS = components.cuda_components()


def test_every_component_is_at_its_cuda_13_0_2_version():
    for name, component in COMPONENTS.items():
        assert component.wheel.version == component.version, name
        assert component.nixpkgs_file["repo"] == "NixOS/nixpkgs", name
        assert component.differences, f"{name}: say where the wheel or the layout differs from nixpkgs"


@pytest.mark.network
@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_each_wheel_is_pypis_file(name):
    wheel = COMPONENTS[name].wheel
    (found,) = [f for f in pypi.release_files(wheel.name, wheel.version) if f.filename == wheel.filename]
    assert (found.url, found.sha256, found.size) == (wheel.url, wheel.sha256, wheel.size)


@pytest.mark.network
def test_tool_wheels_are_pypis_files():
    data = components.tools()
    for wheel in [data["cmake"], *data["python_build_system"]]:
        (found,) = [f for f in pypi.release_files(wheel.name, wheel.version) if f.filename == wheel.filename]
        assert (found.url, found.sha256, found.size) == (wheel.url, wheel.sha256, wheel.size), wheel.name


@pytest.mark.parametrize(("name", "broken", "field"), [
    ("cuda-13.0.2.json", lambda d: {**d, "components": {"cuda_nvcc": {**d["components"]["cuda_nvcc"], "outputs": "out"}}},
     "outputs"),
    ("tools.json", lambda d: {**d, "numactl": {"debian_packages": "libnuma1"}}, "debian_packages"),
])
def test_a_data_file_of_the_wrong_shape_is_refused_naming_the_field(name, broken, field, tmp_path):
    for other in components.SHAPES:
        (tmp_path / other).write_text((components.HERE / other).read_text())
    (tmp_path / name).write_text(json.dumps(broken(json.loads((components.HERE / name).read_text()))))
    load = components.cuda_components if name.startswith("cuda") else components.tools
    with pytest.raises(DataError) as caught:
        load(tmp_path)
    assert caught.value.field == field and caught.value.path == tmp_path / name


@pytest.mark.proc
def test_python_build_system_is_build_system_pkgs_lock():
    lock = tomllib.loads((nix_inputs.source("build-system-pkgs") / "uv.lock").read_text())
    locked = {p["name"]: p for p in lock["package"]}
    for wheel in components.tools()["python_build_system"]:
        entry = locked[wheel.name]
        assert entry["version"] == wheel.version, wheel.name
        assert [(w["url"], w["hash"]) for w in entry["wheels"]] == [(wheel.url, f"sha256:{wheel.sha256}")], wheel.name


CUDART_FILES = ["include/cuda_runtime.h", "include/cooperative_groups/reduce.h", "lib/libcudart.so.13",
                "lib/libcudart_static.a", "lib/libcudadevrt.a", "lib/stubs/libcuda.so", "lib/cmake/x/x.cmake",
                "share/pkgconfig/cudart.pc"]


def test_outputs_split_as_build_redist_moves_them():
    owner = layout.split_outputs(COMPONENTS["cuda_cudart"], CUDART_FILES)
    assert owner == {
        "include/cuda_runtime.h": "include",
        "include/cooperative_groups/reduce.h": "include",
        "lib/libcudart.so.13": "lib",
        "lib/libcudart_static.a": "static",  # */*.a, moved out of lib after it
        "lib/libcudadevrt.a": "static",
        "lib/stubs/libcuda.so": "stubs",  # lib/stubs, moved out of lib after it
        "lib/cmake/x/x.cmake": "lib",  # **/*.cmake is */*.cmake without globstar; lib takes it
        "share/pkgconfig/cudart.pc": "out",  # likewise not */*.pc
    }
    assert set(layout.split_outputs(COMPONENTS["cuda_cccl"], CUDART_FILES).values()) == {"out"}


def test_package_files_moves_and_drops():
    cccl, nvvm = COMPONENTS["cuda_cccl"], COMPONENTS["libnvvm"]
    assert layout.relocate(cccl, "nvidia/cu13/include/cccl/cuda/atomic") == "include/cuda/atomic"
    assert layout.relocate(cccl, "nvidia/cu13/include/nv/target") is None
    assert layout.relocate(cccl, "nvidia_cuda_cccl-13.0.85.dist-info/RECORD") is None
    assert layout.relocate(nvvm, "nvidia/cu13/nvvm/bin/cicc") == "bin/cicc"
    assert layout.relocate(nvvm, "nvidia/cu13/lib/libnvvm.so.4") == "lib64/libnvvm.so.4"


def test_propagation_follows_setup_sh(tmp_path):
    tree = layout.CudaTree(tmp_path, COMPONENTS, compiler_bindir="/usr/bin")
    tree.outputs = lambda name: {}  # the order needs no files
    cublas = stdenv.Input(tree.output_dir("libcublas", "dev"), "libcublas", "dev")
    order = [(i.component, i.output) for i in stdenv.host_closure([cublas], tree)]
    assert order == [
        ("libcublas", "dev"),
        # its propagatedBuildInputs (cuda_cudart, a package: its dev output), depth first
        ("cuda_cudart", "dev"),
        ("cuda_nvcc", "out"), ("cuda_crt", "out"), ("cuda_cccl", "out"),  # lib.getOutput "include" of 1-output packages
        ("cuda_cudart", "include"), ("cuda_cudart", "lib"), ("cuda_cudart", "static"), ("cuda_cudart", "stubs"),
        # then the dev output's propagated outputs
        ("libcublas", "include"), ("libcublas", "lib"),
    ]


def test_build_environment_of_inputs(tmp_path):
    (tmp_path / "a" / "include").mkdir(parents=True)
    (tmp_path / "a" / "lib").mkdir()
    (tmp_path / "a" / "lib" / "liba.so").touch()
    (tmp_path / "b" / "lib" / "python3.12").mkdir(parents=True)  # no library: no -L
    env = stdenv.build_environment([tmp_path / "a", tmp_path / "b"])
    assert env == {"CMAKE_PREFIX_PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}",
                   "NIX_CFLAGS_COMPILE": f"-isystem {tmp_path / 'a' / 'include'}",
                   "NIX_LDFLAGS": f"-L{tmp_path / 'a' / 'lib'}"}


@pytest.mark.proc
def test_symlink_join_keeps_the_first_and_runs_post_build(tmp_path):
    for name, text in (("one", "first"), ("two", "second")):
        (tmp_path / name / "include").mkdir(parents=True)
        (tmp_path / name / "include" / "x.h").write_text(text)
    (tmp_path / "two" / "lib").mkdir()
    out = stdenv.symlink_join(tmp_path / "out", [tmp_path / "one", tmp_path / "two"], "ln -s lib $out/lib64\n")
    assert (out / "include" / "x.h").read_text() == "first"
    assert (out / "lib").is_dir() and Path(out / "lib64").readlink() == Path("lib")
