#!/usr/bin/env python3
"""Exposure of the sglang unit as `systemd-analyze security --offline=true` scores it.

    measure.py --nixpkgs-lib DIR [--out results.json]

DIR is nixpkgs.lib's lib/ directory at the revision flake.lock locks as
nixpkgs-lib (README.md says how to get it). Each host configuration below is
evaluated with tests/nixos/eval.nix (the real evalModules, the module as NixOS
evaluates it), the unit is written out as NixOS writes unit files (one
`Key=value` line per value, lists repeated, booleans true/false, the
environment as Environment= lines), and systemd's own analyzer scores it.
A measurement, not a test: the figures are recorded in results.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from module_eval import host, stack_package  # noqa: E402

VARIANTS = {
    "default": ("the default: checkpoint from the Hub, dynamic user", []),
    "local-checkpoint": ("a local checkpoint: the unit may reach loopback only",
                         ['services.sglang.model.path = "/srv/models/qwen3.5-397b-a17b-nvfp4";']),
    "static-user": ("a static user owning a state directory outside /var/lib",
                    ['services.sglang.user = "sglang"; services.sglang.stateDir = "/srv/sglang";']),
}


def value_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def section(attrs: dict) -> list[str]:
    lines = []
    for key in sorted(attrs):
        values = attrs[key] if isinstance(attrs[key], list) else [attrs[key]]
        lines += [f"{key}={value_text(v)}" for v in values]
    return lines


def unit_text(unit: dict) -> str:
    head = {"Description": unit["description"], **unit["unitConfig"]}
    for key, option in (("Wants", "wants"), ("After", "after")):
        if unit[option]:
            head[key] = " ".join(unit[option])
    env = [f'Environment="{k}={v}"' for k, v in sorted(unit["environment"].items())]
    return "\n".join(["[Unit]", *section(head), "", "[Service]", *env, *section(unit["serviceConfig"]), ""])


def evaluate(lib_dir: Path, text: str, work: Path) -> dict:
    config = work / "host.nix"
    config.write_text(text)
    expr = f"import ./tests/nixos/eval.nix {{ libPath = {lib_dir}; config = {config}; }}"
    result = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        sys.exit(f"evaluation failed:\n{result.stderr}")
    data = json.loads(result.stdout)
    if data["failedAssertions"]:
        sys.exit(f"the configuration fails its assertions: {data['failedAssertions']}")
    return data["unit"]


def analyze(unit_file: Path) -> tuple[float, str, str]:
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", unit_file.name],
                            cwd=unit_file.parent, capture_output=True, text=True, timeout=120)
    report = result.stdout + result.stderr
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", report)
    if not match:
        sys.exit(f"no exposure level in systemd-analyze's output:\n{report}")
    return float(match.group(1)), match.group(2), report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nixpkgs-lib", type=Path, required=True, help="nixpkgs.lib's lib/ at the locked revision")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = parser.parse_args()
    if shutil.which("systemd-analyze") is None:
        sys.exit("systemd-analyze is not installed (apt-get install systemd)")
    version = subprocess.run(["systemd-analyze", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, (what, settings) in VARIANTS.items():
            unit = evaluate(args.nixpkgs_lib.resolve(), host(*settings, package=stack_package()), work)
            unit_file = work / "sglang.service"
            text = unit_text(unit)
            unit_file.write_text(text)
            exposure, verdict, report = analyze(unit_file)
            print(f"{name:18} {exposure:4.1f} {verdict}   ({what})")
            runs[name] = {"configuration": what, "settings": settings, "exposure": exposure, "verdict": verdict,
                          "unit": text, "report": report}
    results = {
        "tool": version,
        "command": "systemd-analyze security --offline=true --no-pager sglang.service",
        "date": datetime.date.today().isoformat(),
        "module_commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                                        text=True).stdout.strip(),
        "runs": runs,
    }
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
