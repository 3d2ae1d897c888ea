"""The flake's overlays (overlays/) and `nix flake check` without KVM,
evaluated from the real flake.nix with the real uv2nix, pyproject.nix,
build-system-pkgs and nixpkgs.lib and a stand-in nixpkgs (tests/support/flake_eval.py).

- overlays.default adds the flake's own packages.<system> derivations (the
  pinned configuration) by the names of overlays/attributes.nix,
  reads nothing of the host's package set but its system, and changes no
  attribute the host had.
- overlays.host-nixpkgs builds the same packages from the host's package set:
  its python312 and cudaPackages_13_0 are the ones used.
- overlays.cuda-13-0 makes cudaPackages_13_0 the set's cudaPackages, and only that.
- `checks` holds nothing that needs KVM (or a GPU); the NixOS VM test is
  legacyPackages.<system>.nixosTests.sglang, where `nix build .#nixosTests.sglang`
  finds it.
- `nix flake check --no-build` (the real nix's checks of every output) passes.
"""

from __future__ import annotations

import shutil

import pytest
from support.flake_eval import FLAKE_NIXPKGS, FlakeEval

from blackwell_stack.data import stack as stack_data

pytestmark = pytest.mark.nix

LOCKED = [name for name in stack_data.names() if stack_data.load(name).locked]
# What every overlay of the flake adds (overlays/attributes.nix).
ADDED = sorted(["blackwell-stack", "sgl-kernel", *(stack_data.load(name).env_attribute for name in LOCKED)])
HOST = "host"


@pytest.fixture(scope="module")
def flake(tmp_path_factory) -> FlakeEval:
    return FlakeEval(tmp_path_factory.mktemp("flake-eval"))


def host_set(flake: FlakeEval, overlays: str = "[ ]", label: str = HOST, config: str = "{ cudaSupport = true; }") -> str:
    """A Nix expression: the host's package set (the stand-in nixpkgs) with `overlays` applied, under `config`
    (by default one that enables CUDA, as the README asks of a host)."""
    return (f'(import {flake.nixpkgs} {{ system = "x86_64-linux"; label = "{label}"; config = {config}; '
            f'overlays = {overlays}; }})')


# What the tests read of an added package: its recorded path and package set,
# the derivation's name, and the CUDA tree an environment runs with.
DESCRIBE = """p: {
  path = p.outPath;
  inherit (p) name recordedIn;
  cudaHome = if p ? passthru.blackwellStack then p.passthru.blackwellStack.cudaHome.recordedIn else null;
}"""


def added(flake: FlakeEval, overlay: str) -> dict[str, dict]:
    """The packages overlays.<overlay> adds to a host's package set, as the host sees them."""
    return flake.eval("overlays", f"""o:
      let
        pkgs = {host_set(flake, f"[ o.{overlay} ]")};
        plain = {host_set(flake)};
        new = builtins.filter (name: !(plain ? ${{name}})) (builtins.attrNames pkgs);
      in builtins.listToAttrs (map (name: {{ inherit name; value = ({DESCRIBE}) pkgs.${{name}}; }}) new)""")


@pytest.fixture(scope="module")
def flake_packages(flake) -> dict[str, dict]:
    return flake.eval("packages.x86_64-linux", f"builtins.mapAttrs (_: {DESCRIBE})")


# --- overlays.default: the pinned packages --------------------------------------------------------

def test_the_flake_exports_three_overlays(flake):
    assert flake.eval("overlays", "builtins.attrNames") == ["cuda-13-0", "default", "host-nixpkgs"]


def test_the_default_overlay_adds_the_flakes_own_packages(flake, flake_packages):
    got = added(flake, "default")
    assert sorted(got) == ADDED
    for name, package in got.items():
        # The very derivation of packages.x86_64-linux, from the flake's own nixpkgs.
        assert package == flake_packages[name], name
        assert package["recordedIn"] == FLAKE_NIXPKGS, name
    assert got["sglang-env"]["name"] == "sglang-env-stable"
    assert got["sglang-env"]["cudaHome"] == FLAKE_NIXPKGS


def test_the_default_overlay_reads_nothing_of_the_host_set_but_its_system(flake, flake_packages):
    """Applied to a package set where every attribute but stdenv.hostPlatform.system throws,
    the overlay still gives the flake's packages: the host's python, CUDA, config and
    stdenv cannot change them."""
    got = flake.eval("overlays", f"""o:
      let
        host = {host_set(flake)};
        untouchable = builtins.mapAttrs (name: _: throw "the overlay read the host's ${{name}}") host
          // {{ stdenv = {{ hostPlatform.system = "x86_64-linux"; }}; }};
        added = o.default untouchable untouchable;
      in builtins.mapAttrs (_: {DESCRIBE}) added""")
    assert sorted(got) == ADDED
    assert got == {name: flake_packages[name] for name in ADDED}


def test_the_default_overlay_changes_no_attribute_the_host_had(flake):
    got = flake.eval("overlays", f"""o:
      let
        plain = {host_set(flake)};
        applied = {host_set(flake, "[ o.default ]")};
        derivations = builtins.filter (name: plain.${{name}}.type or null == "derivation") (builtins.attrNames plain);
      in {{
        returned = builtins.attrNames (o.default applied plain);
        kept = builtins.attrNames plain == builtins.filter (name: plain ? ${{name}}) (builtins.attrNames applied);
        changed = builtins.filter (name: plain.${{name}}.outPath != applied.${{name}}.outPath) derivations;
        derivations = builtins.length derivations;
      }}""")
    # The overlay returns its own attributes alone, so `//` keeps every other of the host's.
    assert got["returned"] == ADDED
    assert got["kept"] is True
    assert got["changed"] == [] and got["derivations"] > 10


def test_another_system_gets_a_clear_error(flake):
    err = flake.eval_error("overlays", f"""o:
      (import {flake.nixpkgs} {{ system = "aarch64-linux"; overlays = [ o.default ]; }}).sglang-env.outPath""")
    assert "this flake builds for x86_64-linux, not aarch64-linux" in err


# --- overlays.host-nixpkgs: the same packages from the host's nixpkgs -----------------------------

def test_the_host_overlay_builds_the_same_packages_from_the_host_set(flake, flake_packages):
    got = added(flake, "host-nixpkgs")
    assert sorted(got) == ADDED
    for name, package in got.items():
        # The same derivations by name, recorded by the host's package set: other store paths.
        assert package["name"] == flake_packages[name]["name"], name
        assert package["recordedIn"] == HOST, name
        assert package["path"] != flake_packages[name]["path"], name
    assert got["sglang-env"]["cudaHome"] == HOST


def test_the_host_overlay_uses_the_hosts_python312(flake):
    """A host whose python312 is another Python: the stack's own check names both."""
    err = flake.eval_error("overlays", f"""o:
      ({host_set(flake, '[ (final: prev: { python312 = prev.python312 // { pythonVersion = "3.13"; }; }) o.host-nixpkgs ]')}).sglang-env.outPath""")
    assert "stacks/stable/stack.json says Python 3.12, the set is built with 3.13" in err


def test_the_host_overlay_uses_the_hosts_cuda_13_0(flake):
    err = flake.eval_error("overlays", f"""o:
      let
        pkgs = {host_set(flake, '[ (final: prev: { cudaPackages_13_0 = prev.cudaPackages_13_0.overrideScope (_: _: { cudaMajorMinorVersion = "13.1"; }); }) o.host-nixpkgs ]')};
      in pkgs.sglang-env.passthru.blackwellStack.cudaHome.outPath""")
    assert "cudaPackages_13_0 is CUDA 13.1 at this nixpkgs" in err


def test_the_host_overlay_stops_on_a_config_without_cuda_support(flake):
    """nixpkgs would refuse cuda_nvcc as broken, naming neither the config nor the overlay."""
    err = flake.eval_error("overlays", f"""o:
      ({host_set(flake, "[ o.host-nixpkgs ]", config="{ }")}).sglang-env.outPath""")
    assert "overlays.host-nixpkgs: this nixpkgs' config does not enable CUDA" in err
    assert "nixpkgs.config.cudaSupport = true" in err and "is marked as broken" not in err


def test_the_host_overlay_stops_on_a_nixpkgs_without_cuda_13_0(flake):
    err = flake.eval_error("overlays", f"""o:
      let
        host = builtins.removeAttrs {host_set(flake)} [ "cudaPackages_13_0" ];
      in (o.host-nixpkgs host host).sglang-env.outPath""")
    assert "overlays.host-nixpkgs: this nixpkgs has no cudaPackages_13_0" in err
    assert "Use overlays.default" in err


# --- overlays.cuda-13-0: opt in ---------------------------------------------------------------

def test_the_cuda_overlay_makes_cuda_13_0_the_default_and_nothing_else(flake):
    got = flake.eval("overlays", f"""o:
      let
        plain = {host_set(flake)};
        applied = {host_set(flake, "[ o.cuda-13-0 ]")};
        cudaOf = pkgs: pkgs.callPackage ({{ cudaPackages }}: cudaPackages.cudaMajorMinorVersion) {{ }};
      in {{
        returned = builtins.attrNames (o.cuda-13-0 applied plain);
        before = cudaOf plain;
        after = cudaOf applied;
        same = applied.cudaPackages.cuda_nvcc.outPath == plain.cudaPackages_13_0.cuda_nvcc.outPath;
      }}""")
    assert got["returned"] == ["cudaPackages"]
    assert got["before"] != "13.0" and got["after"] == "13.0"
    assert got["same"] is True


def test_the_cuda_overlay_stops_on_a_nixpkgs_without_cuda_13_0(flake):
    err = flake.eval_error("overlays", f"""o:
      let
        host = builtins.removeAttrs {host_set(flake)} [ "cudaPackages_13_0" ];
      in (o.cuda-13-0 host host).cudaPackages""")
    assert "overlays.cuda-13-0: this nixpkgs has no cudaPackages_13_0" in err


def test_no_other_overlay_applies_the_cuda_overlay(flake):
    """Neither overlays.default nor overlays.host-nixpkgs changes the host's default CUDA
    (the NixOS module sets no nixpkgs.overlays at all: tests/test_serve_module_eval.py)."""
    got = flake.eval("overlays", f"""o: {{
      default = {host_set(flake, "[ o.default ]")}.cudaPackages.cudaMajorMinorVersion;
      host = {host_set(flake, "[ o.host-nixpkgs ]")}.cudaPackages.cudaMajorMinorVersion;
      plain = {host_set(flake)}.cudaPackages.cudaMajorMinorVersion;
    }}""")
    assert got["default"] == got["host"] == got["plain"] != "13.0"


# --- nix flake check on a builder without KVM -------------------------------------------------------

def test_checks_need_no_kvm(flake):
    """What `nix flake check` builds: the CLI, its tests, and the assertions on each locked stack;
    none asks for a system feature (kvm, nixos-test, cuda) a plain x86_64-linux builder lacks."""
    got = flake.eval("checks.x86_64-linux", "builtins.mapAttrs (_: check: check.requiredSystemFeatures or [ ])")
    per_stack = {f"stack-{name}-{what}" for name in LOCKED for what in ("versions", "kernel-torch", "cuda-home")}
    assert set(got) == {"cli", "cli-tests", "cmake-version"} | per_stack
    assert {name: features for name, features in got.items() if features} == {}


def test_the_vm_test_is_nixos_tests_sglang_and_needs_kvm(flake):
    """The attribute `nix build .#nixosTests.sglang` builds (legacyPackages.<system>.nixosTests,
    as nixpkgs keeps its VM tests): the VM test of services.sglang, which needs KVM."""
    got = flake.eval("nixosTests.sglang", "test: { inherit (test) name requiredSystemFeatures; }")
    assert got == {"name": "vm-test-run-sglang-service", "requiredSystemFeatures": ["nixos-test", "kvm"]}


def test_the_gpu_checks_need_the_cuda_feature_and_run_the_kernels_smoke(flake):
    """`nix build .#gpuChecks.<name>` (legacyPackages, out of `checks`): each requires the "cuda" system feature
    that services.sglang.gpuChecks.enable gives the host (nix-required-mounts' nvidia-gpu preset), and runs with
    the default stack's environment; the kernel's runs `kernel test --smoke` on the tests of the tree it was
    built from, with pytest beside the environment."""
    got = flake.eval("gpuChecks", """checks: builtins.mapAttrs (_: c: {
      inherit (c) name requiredSystemFeatures buildCommand; env = c.stackEnvironment.name; inherit (c) script;
    }) checks""")
    assert set(got) == {"sgl-kernel", "acceptance"}
    for check in got.values():
        assert check["requiredSystemFeatures"] == ["cuda"] and check["env"] == "sglang-env-stable"
        assert "torch sees no CUDA GPU in the build sandbox" in check["buildCommand"]
        assert "services.sglang.gpuChecks.enable = true" in " ".join(check["buildCommand"].split())
    kernel = " ".join(got["sgl-kernel"]["script"].split())
    assert "import sgl_kernel" in kernel and "blackwell-stack kernel test --smoke" in kernel
    assert "-source/sgl-kernel/tests" in kernel and "pytest-for-stable" in kernel
    # Without a model and GSM8K as store paths (the flake passes none), the acceptance check says what to pass.
    assert "needs acceptanceModel and gsm8kData as store paths" in got["acceptance"]["script"]


def test_nix_flake_check_evaluates_every_output(flake):
    """`nix flake check --no-build` (the real nix's own output checks: packages, checks, devShells
    and apps are derivations or apps, overlays take `final` and `prev`, modules evaluate)."""
    result = flake.nix("flake", "check", "--no-build")
    assert result.returncode == 0, result.stderr[-4000:]


def test_nix_flake_check_refuses_an_overlay_it_does_not_recognise(flake, tmp_path):
    """The check above means something: an overlay whose arguments are named otherwise fails it."""
    changed = tmp_path / "flake"
    shutil.copytree(flake.flake, changed)
    overlay = changed / "overlays" / "cuda-13-0.nix"
    overlay.write_text(overlay.read_text().replace("final: prev: {", "self: super: {").replace("final", "self"))
    result = flake.nix("flake", "check", "--no-build", flake=changed)
    assert result.returncode != 0
    assert "overlay does not take an argument named 'final'" in " ".join(result.stderr.split())
