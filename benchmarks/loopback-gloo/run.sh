#!/bin/bash
# R1 on CPU: SGLang's Gloo groups under a loopback-only network, with and without GLOO_SOCKET_IFNAME=lo.
#   PY=/path/to/python-with-torch benchmarks/loopback-gloo/run.sh
# Needs root for `unshare -m -n -u` (a private mount, network and host-name namespace; the host's own
# network, host name and /etc/hosts are not changed). Writes results/<case>.json.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PY:?set PY to a Python with torch}"
mkdir -p "$here/results"
run() {  # case LOOPBACK_ONLY GLOO_SOCKET_IFNAME
  local case="$1"
  env -u GLOO_SOCKET_IFNAME LOOPBACK_ONLY="$2" ${3:+GLOO_SOCKET_IFNAME=$3} \
    timeout 300 unshare -m -n -u "$here/namespace.sh" "$py" "$here/gloo_pair.py" 2>/dev/null | tail -1 \
    > "$here/results/$case.json"
  echo "$case: $(cat "$here/results/$case.json")"
}
run open-network 0 ""
run loopback-only 1 ""
run loopback-only-gloo-lo 1 lo
"$py" -c "import torch; print('torch', torch.__version__)" 2>/dev/null > "$here/results/torch.txt"
