#!/bin/bash
# Build sgl-kernel for the GPU that is there (9.0a on an H200) with
# `blackwell-stack kernel build --sources`, offline, then run upstream's kernel
# tests against the wheel with `blackwell-stack kernel test`. Written for a
# device machine that reaches no network and whose commands may last at most
# ten minutes each, run from a checkout of this repository:
#
#   benchmarks/kernel-gpu-tests/device.sh start SOURCES.tar.xz FLASHMLA.tar.xz SECONDS
#       lay out the sources, start the whole run in the background, return;
#       SECONDS: when, from now, the tests must be over (files not started by
#       then are left; the one running is stopped)
#   benchmarks/kernel-gpu-tests/device.sh wait SECONDS
#       until the run ends (or SECONDS pass); results.tar.gz in $OUT each time
#
# The run: `kernel sources check`, `kernel build --arch ARCH`, then
# `kernel test` three times: the files that failed with a plain 9.0 build
# (FIRST_FILES), the merge_state_v2 investigation (merge_state_probe.py, once
# directly and once under cuda-gdb for the native stack of a crash, plus
# gpu_check.py), then every other file.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
W="${GPU_TESTS_WORK:-/tmp/sgl-gpu-tests}"
OUT="${OUT:-$PWD/out}"
PY="${GPU_TESTS_PYTHON:-$(command -v python3)}"
TORCH_STANDIN="${GPU_TESTS_TORCH:-2.11.0+cu130}"
ARCH="${GPU_TESTS_ARCH:-9.0a}"
JOBS="${GPU_TESTS_JOBS:-16}"
# The machine's reported memory starts small and grows as it is used: the planner is given a figure.
MEMORY_GIB="${GPU_TESTS_MEMORY_GIB:-110}"
FILE_TIMEOUT="${GPU_TESTS_FILE_TIMEOUT:-300}"
FIRST_FILES=(test_fp8_gemm.py test_int8_gemm.py test_fp8_blockwise_gemm.py test_cutlass_w4a8_moe_mm.py
  test_fp8_blockwise_moe.py test_es_fp8_blockwise_moe.py test_merge_state_v2.py test_merge_state.py)
R="$W/results"
mkdir -p "$OUT"

cli() { PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack "$@"; }
stamp() { echo "$(date -u +%FT%TZ) $(( $(date +%s) - $(cat "$W/t0") ))s $*" | tee -a "$R/timeline.txt"; }
left() { echo $(( $(cat "$W/deadline") - $(date +%s) )); }
# `timeout 0` would mean no limit: a phase with less than a minute left does not start.
time_for() { local l; l="$(left)"; (( l >= 60 )) || { stamp "no time left for $1"; return 1; }; }
pack() { tar -czf "$W/results.tar.gz.part" -C "$W" results && mv "$W/results.tar.gz.part" "$W/results.tar.gz"; }

layout() {
  local sources="$1" flashmla="$2" src="$W/src"
  rm -rf "$src"; mkdir -p "$src"
  tar -xJf "$sources" -C "$src"
  tar -xJf "$flashmla" -C "$src/fc"
  # The layout `kernel sources fetch` makes: FlashMLA as GitHub's archive leaves it (its submodule's
  # directory empty), the submodule apart under repo-flashmla.submodules/.
  mkdir -p "$src/fc/repo-flashmla.submodules/csrc"
  mv "$src/fc/repo-flashmla/csrc/cutlass" "$src/fc/repo-flashmla.submodules/csrc/cutlass"
  mkdir "$src/fc/repo-flashmla/csrc/cutlass"
}

run_all() {
  cd "$W"
  stamp "sources check"
  cli kernel sources check --dir "$W/src/fc" --arch "$ARCH" --json > "$R/sources-check.json" 2>&1 || true
  stamp "build start"
  command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  setsid nohup "$PY" "$ROOT/benchmarks/kernel-compile-memory/watch_build.py" --out "$R/peaks.json" --idle-exit 60 \
    > "$W/watch.log" 2>&1 < /dev/null &
  # The bundle's CUTLASS, nlohmann/json, triton and FlashMLA's CUTLASS are trimmed or placeholders
  # (they cannot match their pins); every other source is checked by hash.
  local args=(kernel build --src "$W/src/sglang" --sources "$W/src/fc" --arch "$ARCH" --python "$PY"
    --allow-torch "$TORCH_STANDIN" --allow-source-mismatch repo-cutlass --allow-source-mismatch json
    --allow-source-mismatch repo-triton --allow-source-mismatch repo-flashmla.submodules/csrc/cutlass
    --out "$W/out" --build-dir "$W/build" --jobs "$JOBS" --memory-gib "$MEMORY_GIB")
  printf '%q ' blackwell-stack "${args[@]}" > "$R/build-command.txt"; echo >> "$R/build-command.txt"
  if ! cli "${args[@]}" > "$R/build-cli.log" 2>&1; then
    stamp "build FAILED"
    cp "$W"/out/sgl-kernel-build-*.log "$R/" 2>/dev/null || true
    pack; return 1
  fi
  stamp "build done"
  gzip -c "$W"/out/sgl-kernel-build-*.log > "$R/build.log.gz" || true
  cp "$W"/out/sgl-kernel-build-info.json "$R/" 2>/dev/null || true
  local wheel; wheel="$(ls "$W"/out/sgl_kernel-*.whl | head -1)"
  sha256sum "$wheel" > "$R/wheel.sha256"; "$PY" -m zipfile -l "$wheel" > "$R/wheel-members.txt"
  cli inspect "$wheel" --json > "$R/inspect.json" 2>&1 || true
  pack

  local tests="$W/src/sglang/sgl-kernel/tests"
  stamp "tests: first files ($(left)s left)"
  local first=(); for f in "${FIRST_FILES[@]}"; do first+=(--file "$f"); done
  time_for "the first files" && timeout -s INT -k 20 "$(left)" env PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack kernel test \
    --src "$W/src/sglang" --wheel "$wheel" --python "$PY" --timeout "$FILE_TIMEOUT" --logs "$R/tests-first" --json \
    "${first[@]}" > "$R/tests-first.json" 2> "$R/tests-first.err" || true
  stamp "tests: first files done"; pack

  stamp "merge_state_v2 probe"
  rm -rf "$W/site"; "$PY" -m zipfile -e "$wheel" "$W/site"
  ( cd "$W" && for head in 32 64; do
      echo "== merge_state_probe.py --head-size $head"
      PYTHONPATH="$W/site" timeout 120 "$PY" -X faulthandler "$HERE/merge_state_probe.py" --head-size "$head"
      echo "exit code $?"
    done ) > "$R/merge-state-probe.txt" 2>&1 || true
  if command -v cuda-gdb > /dev/null && (( $(left) > 400 )); then
    PYTHONPATH="$W/site" timeout 120 cuda-gdb -batch -ex run -ex bt -ex "info sharedlibrary" \
      --args "$PY" "$HERE/merge_state_probe.py" --head-size 32 > "$R/merge-state-cuda-gdb.txt" 2>&1 || true
  fi
  ( PYTHONPATH="$W/site" timeout 120 "$PY" "$ROOT/pkgs/sgl-kernel/gpu_check.py"; echo "exit code $?" ) \
    > "$R/gpu-check.txt" 2>&1 || true
  stamp "probes done"; pack

  local rest=()
  for f in $(cd "$tests" && find . -name 'test_*.py' | sed 's|^\./||' | sort); do
    [[ " ${FIRST_FILES[*]} " == *" $f "* ]] || rest+=(--file "$f")
  done
  stamp "tests: the rest ($(left)s left)"
  time_for "the rest" && timeout -s INT -k 20 "$(left)" env PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack kernel test \
    --src "$W/src/sglang" --wheel "$wheel" --python "$PY" --timeout "$FILE_TIMEOUT" --logs "$R/tests-rest" --json \
    "${rest[@]}" --file gpu_check.py > "$R/tests-rest.json" 2> "$R/tests-rest.err" || true
  stamp "tests: the rest done"
  pack
}

start() {
  local sources="$1" flashmla="$2" seconds="$3"
  rm -rf "$W"; mkdir -p "$W" "$R"
  date +%s > "$W/t0"; echo $(( $(date +%s) + seconds )) > "$W/deadline"
  {
    echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)"; free -g | sed -n 2p
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
    nvcc --version 2>/dev/null | tail -2 || /usr/local/cuda/bin/nvcc --version | tail -2
    cmake --version | head -1; ninja --version; g++ --version | head -1
    "$PY" -c 'import torch, triton, pytest, scikit_build_core as s; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "pytest", pytest.__version__, "scikit-build-core", s.__version__)'
  } > "$R/env.txt" 2>&1 || true
  cat "$R/env.txt"
  layout "$sources" "$flashmla"
  stamp "laid out"
  setsid nohup bash "$0" run-all > "$W/driver.log" 2>&1 < /dev/null &
  echo "$!" > "$W/driver.pid"
  sleep 20; tail -3 "$W/driver.log"; ls "$W/out" 2>/dev/null || true
}

wait_for() {
  local limit="$1" t0; t0="$(date +%s)"
  while kill -0 "$(cat "$W/driver.pid")" 2>/dev/null && (( $(date +%s) - t0 < limit )); do
    local log step="-"
    log="$(ls "$W"/out/sgl-kernel-build-*.log 2>/dev/null | head -1 || true)"
    [ -n "$log" ] && step="$(grep -oE '^ *\[[0-9]+/[0-9]+\]' "$log" | tail -1 | tr -d ' ' || true)"
    echo "$(( $(date +%s) - $(cat "$W/t0") ))s step ${step:--} $(free -g | awk '/Mem:/{print "used " $3 " GiB"}') $(tail -1 "$R/timeline.txt")"
    sleep 10
  done
  tail -20 "$R/timeline.txt"; tail -5 "$W/driver.log"
  [ -f "$W/results.tar.gz" ] && cp "$W/results.tar.gz" "$OUT/results.tar.gz"
  ls -la "$OUT"
}

case "${1:-}" in
  start) start "$2" "$3" "$4" ;;
  run-all) R="$W/results"; run_all ;;
  wait) wait_for "${2:-540}" ;;
  *) echo "usage: $0 start SOURCES.tar.xz FLASHMLA.tar.xz SECONDS | wait SECONDS" >&2; exit 2 ;;
esac
