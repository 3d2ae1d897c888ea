"""Two ranks of torch.distributed's Gloo backend on this machine's CPU: an all_reduce, as SGLang's CPU groups do.

Prints one JSON line: each rank's exit code and the tail of its output. The rendezvous (TCPStore) is on
127.0.0.1 as SGLang's single-node default; which address Gloo's pairs use is Gloo's own choice
(GLOO_SOCKET_IFNAME, else the address the host name resolves to)."""
import json
import os
import re
import socket
import subprocess
import sys

RANK = """
import datetime, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank={rank}, world_size=2,
                        timeout=datetime.timedelta(seconds=20))
t = torch.ones(4) * ({rank} + 1)
dist.all_reduce(t)
print("all_reduce", t.tolist(), flush=True)
dist.destroy_process_group()
"""

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
ranks = [subprocess.Popen([sys.executable, "-c", RANK.format(port=port, rank=r)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) for r in range(2)]
def tail(text: str) -> list[str]:
    """The last lines that say something: no NumPy warning (torch without numpy), no path of this machine."""
    lines = [line for line in text.strip().splitlines() if "NumPy" not in line and "_conversion_method" not in line]
    return [re.sub(r"/\S*/site-packages/", "SITE/", line) for line in lines[-3:]]


results = []
for p in ranks:
    try:
        out, _ = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        results.append({"rc": "timeout (90 s)", "tail": tail(out)})
        continue
    results.append({"rc": p.returncode, "tail": tail(out)})
print(json.dumps({"hostname": socket.gethostname(), "resolves_to": socket.gethostbyname(socket.gethostname()),
                  "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME"), "ranks": results}))
