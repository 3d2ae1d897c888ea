"""The Nix fixups cover exactly what the locked wheels need (stacks/<name>/wheels.json,
read from the real wheels by `stack audit`), and the torch pairs hold.

The slow test reads every locked wheel again (downloading each and checking
its sha256 against the lock) and compares with the committed wheels.json;
the others check the committed data against the fixups' decisions."""

from __future__ import annotations

import json

import pytest
from support import REPO

from blackwell_stack.data import lock as lockfile
from blackwell_stack.data import stack as stack_data
from blackwell_stack.data import wheel_choice as wheels
from blackwell_stack.formats import remote_zip
from blackwell_stack.stacks import libraries, pairing
from blackwell_stack.stacks.commands import differences

LOCKED = [n for n in stack_data.names() if stack_data.load(n).locked]
DECISIONS = json.loads((REPO / "nix" / "fixups" / "wheel-libraries.json").read_text())
COLLISIONS = json.loads((REPO / "nix" / "fixups" / "env-collisions.json").read_text())


def audits() -> dict[str, dict]:
    return {name: libraries.load_audit(stack_data.load(name)) for name in LOCKED}


@pytest.mark.parametrize("name", LOCKED)
def test_wheels_json_was_made_from_the_lock_that_is_there(name):
    stack = stack_data.load(name)
    assert libraries.audit_is_current(stack, libraries.load_audit(stack)), \
        f"write it again: blackwell-stack stack audit {name} --write"


def test_every_missing_library_is_explained_and_every_explanation_is_needed():
    missing = {(pkg, lib) for a in audits().values() for pkg, info in a["libraries"].items()
               for lib, where in info["needs"].items() if where == "missing"}
    explained = ({(pkg, lib) for pkg, entry in DECISIONS["left_missing"].items() for lib in entry["libraries"]}
                 | {(pkg, lib) for pkg, lib in missing if lib in DECISIONS["from_nixpkgs"]})
    assert missing <= explained, sorted(missing - explained)
    assert {lib for _, lib in missing} >= set(DECISIONS["from_nixpkgs"])
    assert {(p, lib) for p, e in DECISIONS["left_missing"].items() for lib in e["libraries"]} <= missing
    for entry in [*DECISIONS["from_nixpkgs"].values(), *DECISIONS["left_missing"].values()]:
        assert entry["why"]


def test_driver_libraries_are_the_ones_the_audit_classifies_as_driver():
    assert set(DECISIONS["driver"]) == set(libraries.DRIVER_LIBRARIES)
    used = {lib for a in audits().values() for info in a["libraries"].values()
            for lib, where in info["needs"].items() if where == "driver"}
    assert used == {"libcuda.so.1"}


def test_every_python_file_that_names_a_driver_library_is_decided_and_every_decision_is_needed():
    """The audit lists each Python file of a locked wheel that names a driver library; each is a load by name the
    fixups give the driver link's path, or one the fixups leave with the reason."""
    named = {(pkg, file, lib) for a in audits().values() for pkg, files in a["driver_by_name"].items()
             for file, libs in files.items() for lib in libs}
    loads = {(pkg, load["file"], load["library"]) for pkg, e in DECISIONS["driver_by_name"].items() for load in e["loads"]}
    left = {(pkg, file) for pkg, e in DECISIONS["driver_named_only"].items() for file in e["files"]}
    # A file with loads is decided for each name in it (numba's list also names libcuda.so, tried first, then the
    # driver link's libcuda.so.1).
    decided = left | {(pkg, file) for pkg, file, _ in loads}
    undecided = {(pkg, file) for pkg, file, _ in named if (pkg, file) not in decided}
    assert undecided == set(), sorted(undecided)
    assert loads <= named and left <= {(pkg, file) for pkg, file, _ in named}
    assert not {(pkg, file) for pkg, file, _ in loads} & left
    # cuda-bindings 13.x loads both driver libraries through cuda-pathfinder, by name.
    assert {lib for pkg, _, lib in loads if pkg == "cuda-pathfinder"} == set(libraries.DRIVER_LIBRARIES)


def test_the_env_skips_exactly_the_paths_wheels_ship_with_different_contents():
    different = {c["path"]: c["packages"] for a in audits().values() for c in a["collisions"] if not c["identical"]}
    assert different == {path: entry["packages"] for path, entry in COLLISIONS["skip"].items()}
    # The CUDA wheels share the nvidia/ namespace as directories only: no file of it is shared.
    assert not [c for a in audits().values() for c in a["collisions"] if c["path"].startswith("nvidia/")]


def test_the_library_providers_form_no_cycle():
    """Nix builds a provider before the wheel that links it; a cycle could not be evaluated."""
    for name, audit in audits().items():
        edges = {pkg: {p for need in info["needs"].values() if isinstance(need, dict) for p in need["from"]}
                 for pkg, info in audit["libraries"].items()}
        state: dict[str, int] = {}

        def visit(node: str, trail: tuple[str, ...], name=name, edges=edges, state=state) -> None:
            if state.get(node) == 2:
                return
            assert state.get(node) != 1, f"{name}: library cycle {' -> '.join(trail + (node,))}"
            state[node] = 1
            for nxt in edges.get(node, ()):
                visit(nxt, trail + (node,))
            state[node] = 2

        for node in edges:
            visit(node, ())


@pytest.mark.parametrize("name", LOCKED)
def test_torch_gets_libcuda_from_the_driver_and_everything_else_from_locked_wheels(name):
    needs = libraries.load_audit(stack_data.load(name))["libraries"]["torch"]["needs"]
    assert needs["libcuda.so.1"] == "driver"
    assert needs["libnvshmem_host.so.3"] == {"from": ["nvidia-nvshmem-cu13"], "dependency": True}
    others = {lib: where for lib, where in needs.items() if where not in ("system", "driver")}
    assert all(isinstance(where, dict) and where["dependency"] for where in others.values()), others


@pytest.mark.parametrize("name", LOCKED)
def test_every_package_that_links_torch_is_paired(name):
    stack = stack_data.load(name)
    pairs = libraries.load_audit(stack)["torch_pairs"]
    assert pairs["torch"] == stack.versions()["torch"]
    assert pairs["unlisted"] == []
    assert set(pairs["pairs"]) == set(stack.torch_pairs)
    for package, result in pairs["pairs"].items():
        assert result["ok"], (package, result)
        how = stack.torch_pairs[package]["check"]
        assert result["check"] == how
        if how == "metadata":
            assert result["found"] == f"Requires-Dist torch=={pairs['torch']}", package
        elif how in ("symbols", "lock"):
            # Every torch symbol resolves, and there were some to resolve.
            assert result["missing"] == [] and result["needed"] > 0, package
        elif how == "unpaired":
            # Unpaired ones really are not built for this torch: the audit saw what is missing.
            assert result["missing"], package


def test_the_torch_pairs_of_each_stack():
    """How each stack pairs its torch: the kernel built against it (stable) or resolving in it
    (current, kernel.from = "lock"); torchvision pinned exactly (stable) or on the stable ABI (current)."""
    checks = {name: {p: r["check"] for p, r in libraries.load_audit(stack_data.load(name))["torch_pairs"]["pairs"].items()}
              for name in LOCKED}
    assert checks["stable"]["sgl-kernel"] == "source" and checks["stable"]["torchvision"] == "metadata"
    assert {p for p, c in checks["stable"].items() if c == "unpaired"} == {"torchao", "torch-c-dlpack-ext"}
    assert checks["current"]["sglang-kernel"] == "lock" and checks["current"]["torchvision"] == "symbols"
    assert {p for p, c in checks["current"].items() if c == "unpaired"} == {"torch-c-dlpack-ext"}
    current = libraries.load_audit(stack_data.load("current"))["torch_pairs"]["pairs"]
    assert current["sglang-kernel"]["needed"] == 122  # the same count `doctor abi` gives (tests/test_sglang_kernel_wheel.py)


METADATA_PAIRS = [(name, package) for name in LOCKED
                  for package, pair in stack_data.load(name).torch_pairs.items() if pair["check"] == "metadata"]


def _torch_requirement(stack: str, package: str) -> str | None:
    """The torch requirement of a locked wheel's METADATA, read straight from the wheel (a range read)."""
    lock = stack_data.load(stack).lock()
    pkg = lock.get(package)
    with remote_zip.RemoteWheel(libraries.remote_file(wheels.uv_choice(pkg))) as rw:
        meta = rw.fetch_member(f"{package.replace('-', '_')}-{pkg.version}.dist-info/METADATA").read_text()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    return pairing._metadata_pin(requires)


@pytest.mark.network
@pytest.mark.parametrize(("name", "package"), METADATA_PAIRS)
def test_a_metadata_pair_pins_the_locked_torch_in_the_wheels_own_metadata(name, package):
    assert _torch_requirement(name, package) == f"torch=={stack_data.load(name).versions()['torch']}"


@pytest.mark.network
def test_the_current_torchvision_asks_only_for_a_torch_on_its_stable_abi():
    """Why torchvision 0.29.1 is paired by its symbols in the current stack: its METADATA pins no torch."""
    assert _torch_requirement("current", "torchvision") == "torch>=2.14.0"


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("name", LOCKED)
def test_the_audit_is_what_the_wheels_say(name):
    """Every locked wheel downloaded, its sha256 checked against the lock, read again (cached by sha256)."""
    stack = stack_data.load(name)
    lock = stack.lock()
    fresh = libraries.audit(stack, lock, libraries.read_all(stack, lock))
    assert differences(libraries.load_audit(stack), fresh) == []
    chosen = stack.chosen_wheels(lock)
    assert {n: f["sha256"] for n, f in fresh["files"].items()} == {n: lockfile.sha256_of(w) for n, (_, w) in chosen.items()}
