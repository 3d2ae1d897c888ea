#!/bin/bash
# Two full sgl-kernel builds side by side with `blackwell-stack kernel build`,
# then a byte-for-byte comparison. Written for the project's 32-core device
# machine (2 GPUs, 256 GiB), run from a checkout of this repository:
#
#   benchmarks/kernel-reproducibility/device.sh start SOURCES.tar.xz   # unpack twice, start both builds, return
#   benchmarks/kernel-reproducibility/device.sh wait SECONDS           # until both finish (or SECONDS pass)
#   benchmarks/kernel-reproducibility/device.sh compare                # wheel diff, members, objects, archs
#
# Each build has its own copy of the sources and its own build and output
# directories (of different lengths). nvcc names anonymous namespaces after
# the absolute path of the .cu it compiles (cudafe++'s --orig_src_path_name,
# see docs/sgl-kernel.md), so the two copies are shown to each build at the
# same path, /srv/sgl-src, through a private mount namespace (unshare -m): the
# builds run at once and still see one source path. Results go to $OUT
# (default ./out).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
W="${REPRO_WORK:-/tmp/sgl-repro}"
OUT="${OUT:-$PWD/out}"
SRC_MOUNT=/srv/sgl-src
PY="${REPRO_PYTHON:-$(command -v python3)}"
TORCH_STANDIN="${REPRO_TORCH:-2.11.0+cu130}"
JOBS="${REPRO_JOBS:-16}"
# Each build is given 200 GiB: the two plans' worst cases (2 x 125.7 GiB after the
# planner's reserve) fit in the machine's 256 GiB. An explicit figure, because
# this machine's MemTotal starts small and grows as memory is used.
MEMORY_GIB="${REPRO_MEMORY_GIB:-200}"
UNLISTED_PEAK_MIB="${REPRO_UNLISTED_PEAK_MIB:-}"
BUILD_DIRS=(build b/uild-dir-with-a-longer-name)
mkdir -p "$OUT"

cli() { PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack "$@"; }

start() {
  local tarball="$1"
  mkdir -p "$W" "$SRC_MOUNT"
  {
    echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)"; free -g | sed -n 2p
    nvcc --version | tail -2; cmake --version | head -1; ninja --version; g++ --version | head -1
    "$PY" -c 'import torch, scikit_build_core as s; print("torch", torch.__version__, "cuda", torch.version.cuda, "scikit-build-core", s.__version__)'
    ld --version | head -1; ar --version | head -1
  } > "$OUT/env.txt" 2>&1 || true
  cat "$OUT/env.txt"
  command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  local isolate=1
  unshare -m --propagation private sh -c 'mount --bind "$1" "$2"' sh "$W" "$SRC_MOUNT" 2>/dev/null || isolate=0
  echo "mount namespaces: $isolate" | tee -a "$OUT/env.txt"
  setsid nohup "$PY" "$ROOT/benchmarks/kernel-compile-memory/watch_build.py" --out "$W/peaks.json" \
    --idle-exit 120 > "$W/watch.log" 2>&1 < /dev/null &
  echo "$!" > "$W/watch.pid"
  local i=0
  for x in a b; do
    rm -rf "${W:?}/$x"; mkdir -p "$W/$x/src"
    tar -xJf "$tarball" -C "$W/$x/src" 2>/dev/null \
      || "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' "$tarball" "$W/$x/src"
    local src="$SRC_MOUNT" build="$W/$x/${BUILD_DIRS[$i]}"
    [ "$isolate" = 1 ] || src="$W/$x/src"
    local args=(kernel build --src "$src/sglang" --sources "$src/fc" --python "$PY" --allow-torch "$TORCH_STANDIN"
      --allow-source-mismatch repo-cutlass --allow-source-mismatch json --allow-source-mismatch repo-triton
      --out "$W/$x/out" --build-dir "$build" --jobs "$JOBS" --memory-gib "$MEMORY_GIB" ${UNLISTED_PEAK_MIB:+--job-peak-mib "$UNLISTED_PEAK_MIB"})
    printf '%q ' blackwell-stack "${args[@]}" > "$W/$x/command.txt"; echo >> "$W/$x/command.txt"
    if [ "$isolate" = 1 ]; then
      setsid nohup unshare -m --propagation private sh -c \
        'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$W/$x/src" "$SRC_MOUNT" \
        env PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack "${args[@]}" > "$W/$x/cli.log" 2>&1 < /dev/null &
    else
      setsid nohup env PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack "${args[@]}" > "$W/$x/cli.log" 2>&1 < /dev/null &
    fi
    echo "$!" > "$W/$x/pid"
    i=$((i + 1))
  done
  date +%s > "$W/started"
  wait_for 120 configured
}

status_line() {
  local x="$1" log
  log="$(ls "$W/$x/out"/sgl-kernel-build-*.log 2>/dev/null | head -1 || true)"
  local step="-"
  [ -n "$log" ] && step="$(grep -oE '^ *\[[0-9]+/[0-9]+\]' "$log" | tail -1 | tr -d ' ' || true)"
  local state=running
  grep -q '^built ' "$W/$x/cli.log" 2>/dev/null && state=built
  kill -0 "$(cat "$W/$x/pid")" 2>/dev/null || { [ "$state" = built ] || state=stopped; }
  echo "$x:$state:${step:--}"
}

# wait_for SECONDS [configured]: until both builds are done (or, with
# `configured`, until both compile), printing progress every 20 s.
wait_for() {
  local limit="$1" until="${2:-done}" t0 now
  t0="$(date +%s)"
  while :; do
    now="$(date +%s)"
    local a b
    a="$(status_line a)"; b="$(status_line b)"
    echo "$(( now - $(cat "$W/started") ))s $a $b $(free -g | awk '/Mem:/{print "used " $3 " GiB"}')"
    if [ "$until" = configured ]; then
      [[ "$a" != *:- && "$b" != *:- ]] && break
      [[ "$a" == *stopped* || "$b" == *stopped* ]] && break
    else
      [[ "$a" != *running* && "$b" != *running* ]] && break
    fi
    (( now - t0 >= limit )) && break
    sleep 20
  done
  for x in a b; do tail -5 "$W/$x/cli.log" | sed "s/^/$x| /"; done
}

compare() {
  kill -TERM "$(cat "$W/watch.pid")" 2>/dev/null || true
  sleep 2
  local results="$W/results"
  rm -rf "$results"; mkdir -p "$results"
  PYTHONPATH="$ROOT/src" "$PY" "$HERE/compare.py" --work "$W" --results "$results" --build-dirs "${BUILD_DIRS[@]}"
  for x in a b; do
    cp "$W/$x/cli.log" "$results/cli-$x.log"; cp "$W/$x/command.txt" "$results/command-$x.txt"
    cp "$W/$x"/out/sgl-kernel-build-*.log "$results/build-$x.log" 2>/dev/null || true
  done
  cp "$W/peaks.json" "$results/peaks.json" 2>/dev/null || true
  cp "$OUT/env.txt" "$results/" 2>/dev/null || true
  tar -czf "$OUT/results.tar.gz" -C "$W" results
  ls -la "$OUT"
}

case "${1:-}" in
  start) start "$2"; ;;
  wait) wait_for "${2:-540}" ;;
  compare) compare ;;
  *) echo "usage: $0 start SOURCES.tar.xz | wait SECONDS | compare" >&2; exit 2 ;;
esac
