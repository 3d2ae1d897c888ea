# NixOS VM test of services.sglang (modules/sglang.nix) with stand-in servers:
# no GPU and no model, the unit exactly as the module builds it.
#
# The package is a stand-in for SGLang (./stand-in-sglang: `sglang.launch_server`
# answering the OpenAI API the way SGLang does), wrapped like a stack env, with
# passthru.blackwellStack. Four machines:
#
# - good:    answers sensibly; host 0.0.0.0, firewall left closed.
#            The readiness gate and the smoke test pass; the key arrives as a
#            credential and is required by the server, but is in no unit file
#            and no command line; crashes restart until the start limit stops them.
# - garbage: answers runs of "!"; a local checkpoint, so the unit may reach
#            loopback only. The smoke test fails the start: the unit is stopped
#            with result exit-code, the reason is in the journal, no restart.
# - slow:    never gets healthy. The readiness gate gives up after its timeout
#            with the reason in the journal, no restart.
# - client:  the firewall of `good` refuses it.
#
# The nodes use a plain nixpkgs (the flake passes nixpkgs.legacyPackages), so
# the test also shows that the module needs no overlay, no CUDA nixpkgs config
# and nothing unfree from the host's package set. runNixOSTest makes the nodes'
# nixpkgs read-only: a module that set nixpkgs.* would fail here.
#
# Run it where nixpkgs and KVM are (docs/nixos-module.md):
#   nix build .#nixosTests.sglang -L
#   nix run .#nixosTests.sglang.driverInteractive   # by hand
{
  pkgs,
  blackwell-stack,
}:
let
  inherit (pkgs) lib;
  profile = lib.importJSON ../profiles/qwen3.5-397b-a17b-nvfp4-sm120.json;
  apiKeyFile = "/run/keys/sglang-api-key";

  # What passthru.blackwellStack names, as empty trees: the stand-in compiles nothing.
  cudaHome = pkgs.runCommand "stand-in-cuda-home" { } "mkdir -p $out/bin $out/include $out/lib";

  # A "Python environment with SGLang": bin/python3 finds the stand-in `sglang`
  # package and answers as told. It stands in for the default stack's
  # environment (services.sglang.stack's default, whose first profile is this
  # one), and its versions are the profile's, as a stack env's are.
  standInPackage =
    answers:
    pkgs.runCommand "stand-in-sglang-${answers}"
      {
        passthru.blackwellStack = {
          stack = (import ../../lib/stacks.nix).default;
          versions = {
            inherit (profile.runtime) sglang flashinfer;
            torch = "none";
          };
          inherit cudaHome;
          cc = pkgs.stdenv.cc;
        };
      }
      ''
        mkdir -p $out/bin $out/lib
        cp -r ${./stand-in-sglang}/sglang $out/lib/sglang
        cat > $out/bin/python3 <<EOF
        #!${pkgs.runtimeShell}
        export PYTHONPATH=$out/lib STAND_IN_ANSWERS=${answers}
        exec ${pkgs.python3}/bin/python3 "\$@"
        EOF
        chmod +x $out/bin/python3
      '';

  node =
    answers: settings:
    { lib, ... }:
    {
      imports = [ ../sglang.nix ];
      services.sglang = lib.mkMerge [
        {
          enable = true;
          package = standInPackage answers;
          # The configuration is checked when the machine is built (../sglang/check.nix).
          checkPackage = blackwell-stack;
          requireNvidiaDriver = false; # no GPU in the VM
          inherit apiKeyFile;
          environment.STAND_IN_LOAD_SECONDS = lib.mkDefault "3";
          readiness = {
            timeoutSec = lib.mkDefault 120;
            intervalSec = 1;
          };
          restart.delaySec = 1;
          smokeTest = {
            enable = true;
            package = blackwell-stack;
            maxTokens = 16;
            timeout = 30;
          };
        }
        settings
      ];
      # Started by the test script once the key file exists.
      systemd.services.sglang.wantedBy = lib.mkForce [ ];
    };
in
pkgs.testers.runNixOSTest {
  name = "sglang-service";

  nodes = {
    good = node "good" {
      host = "0.0.0.0";
      openFirewall = false;
    };
    garbage = node "garbage" {
      model.path = "/var/lib/stand-in-checkpoint";
    };
    slow = node "good" {
      environment.STAND_IN_LOAD_SECONDS = "3600";
      readiness.timeoutSec = 10;
    };
    client = { pkgs, ... }: {
      environment.systemPackages = [ pkgs.curl ];
    };
  };

  testScript = ''
    import secrets

    # The key is made here, at run time: it is in no Nix file and no store path.
    key = "sk-vm-" + secrets.token_hex(16)


    def show(machine, prop):
        return machine.succeed(f"systemctl show -P {prop} sglang.service").strip()


    start_all()
    for m in (good, garbage, slow):
        m.wait_for_unit("multi-user.target")
        m.succeed(f"install -D -m 0400 /dev/stdin ${apiKeyFile} <<< '{key}'")

    with subtest("the readiness gate and the smoke test pass on a good server"):
        good.succeed("systemctl start sglang.service")
        assert show(good, "ActiveState") == "active"
        good.succeed("journalctl -u sglang.service | grep -F 'answered 200'")
        good.succeed("journalctl -u sglang.service | grep -F 'smoke passed'")

    with subtest("the key arrives by credential, is required, and is never in the unit"):
        assert "api-key:${apiKeyFile}" in show(good, "LoadCredential")
        good.succeed(f"curl -sf -H 'Authorization: Bearer {key}' http://127.0.0.1:30000/v1/models")
        good.fail("curl -sf http://127.0.0.1:30000/v1/models")
        unit = good.succeed("systemctl cat sglang.service")
        assert key not in unit, "the key is in the unit file"
        pid = show(good, "MainPID")
        cmdline = good.succeed(f"tr '\\0' ' ' < /proc/{pid}/cmdline")
        assert key not in cmdline and "--api-key" not in cmdline, cmdline
        assert "sglang-launcher.py" in cmdline, cmdline

    with subtest("the firewall stays closed"):
        good.succeed("ss -tlnH | grep -F '0.0.0.0:30000'")
        client.wait_for_unit("multi-user.target")
        client.fail("curl -sf --max-time 5 http://good:30000/health")

    with subtest("the smoke gate stops the garbage server, and it is not restarted"):
        garbage.fail("systemctl start sglang.service")
        garbage.succeed("journalctl -u sglang.service | grep -F 'smoke failed'")
        garbage.sleep(5)  # RestartSec is 1 s: a restart would have happened
        assert show(garbage, "ActiveState") == "failed"
        assert show(garbage, "Result") == "exit-code"
        assert show(garbage, "NRestarts") == "0"
        garbage.fail("curl -s --max-time 2 http://127.0.0.1:30000/health")

    with subtest("a local checkpoint: the unit may reach loopback only"):
        assert show(garbage, "IPAddressDeny") != ""
        assert show(garbage, "IPAddressAllow") != ""
        assert show(good, "IPAddressDeny") == ""

    with subtest("a readiness timeout stops the unit with the reason, and it is not restarted"):
        slow.fail("systemctl start sglang.service")
        slow.succeed("journalctl -u sglang.service | grep -F 'did not answer 200 within 10 s'")
        slow.sleep(5)
        assert show(slow, "ActiveState") == "failed"
        assert show(slow, "Result") == "exit-code"
        assert show(slow, "NRestarts") == "0"

    with subtest("crashes restart, until the start limit stops them"):
        # The first start was one of the 3 (restart.burst) allowed in the interval.
        for restarts in (1, 2):
            good.succeed("systemctl kill -s KILL --kill-whom=main sglang.service")
            good.wait_until_succeeds(f"test $(systemctl show -P NRestarts sglang.service) = {restarts}")
            good.wait_until_succeeds("systemctl is-active sglang.service")
        good.succeed("systemctl kill -s KILL --kill-whom=main sglang.service")
        good.wait_until_succeeds("test $(systemctl show -P Result sglang.service) = start-limit-hit")
        assert show(good, "ActiveState") == "failed"
  '';
}
