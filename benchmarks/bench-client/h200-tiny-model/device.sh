#!/bin/bash
# Device run of issue 6: serve tiny random models with transformers serve (continuous batching)
# on the GPU, then smoke + bench against it. Usage: bash device.sh DEVICE SIZE DURATION LEVELS
set -u
DEVICE=${1:-cuda}; SIZE=${2:-gpu}; DURATION=${3:-15}; LEVELS=${4:-1,8,32,64,128}
OUT=${OUT:-/tmp/verify-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [ -n "${INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/verify-wheels/*.whl || exit 9
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
{ date -u; python3 --version; python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null; nproc; } > "$OUT/info.txt" 2>&1
python3 tests/verify_server.py /tmp/verify-models --port 8000 --device "$DEVICE" --size "$SIZE" --serve-arg=--continuous-batching > "$OUT/server.log" 2>&1 &
SERVER=$!
for i in $(seq 1 240); do grep -q "^ready at" "$OUT/server.log" && break; kill -0 $SERVER 2>/dev/null || break; sleep 1; done
grep -q "^ready at" "$OUT/server.log" || { echo "server not ready"; tail -50 "$OUT/server.log"; exit 8; }
URL=http://127.0.0.1:8000
python3 -m blackwell_stack smoke $URL --model /tmp/verify-models/random > "$OUT/smoke-random.txt" 2>&1; echo "smoke random rc=$?" | tee -a "$OUT/info.txt"
python3 -m blackwell_stack smoke $URL --model /tmp/verify-models/bang > "$OUT/smoke-bang.txt" 2>&1; echo "smoke bang rc=$?" | tee -a "$OUT/info.txt"
python3 -m blackwell_stack bench $URL --model /tmp/verify-models/random --concurrency "$LEVELS" --duration "$DURATION" \
  --input-len 256 --output-len 256 --out "$OUT/bench.json" --plot "$OUT/bench.png" > "$OUT/bench.txt" 2>&1; echo "bench rc=$?" | tee -a "$OUT/info.txt"
cat "$OUT/bench.txt"
kill $SERVER; wait $SERVER 2>/dev/null
python3 benchmarks/bench-client/run.py --concurrency 256 --requests 256 --tokens 300 --pace-ms 20 --out "$OUT/client.json" > /dev/null 2>&1; echo "client rc=$?" >> "$OUT/info.txt"
cat "$OUT/info.txt"; head -c 1500 "$OUT/smoke-random.txt"
