#!/bin/bash
# Run inside `unshare -m -n -u`: a host with loopback and a second interface, whose name resolves to the
# second interface's address, where only loopback addresses may be reached (as IPAddressAllow=localhost).
set -euo pipefail
ip link set lo up
ip link add v0 type veth peer name v1
ip addr add 10.55.0.1/24 dev v0
ip link set v0 up; ip link set v1 up
hostname gpu-host
hosts="$(mktemp)"
printf '127.0.0.1 localhost\n10.55.0.1 gpu-host\n' > "$hosts"
mount --bind "$hosts" /etc/hosts
# Addresses of this host other than loopback are refused (connect fails, as under the unit's cgroup filter):
# a prohibit rule ahead of the local table, which is moved behind it.
if [[ ${LOOPBACK_ONLY:-1} == 1 ]]; then
  ip rule add pref 100 lookup local
  ip rule del pref 0
  ip rule add pref 10 to 10.55.0.0/24 prohibit
fi
ip -br addr
exec "$@"
