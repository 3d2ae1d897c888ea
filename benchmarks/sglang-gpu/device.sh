#!/bin/bash
# SGLang 0.5.9 started for real with a kernel `blackwell-stack kernel build` made, on the GPU machine
# (one H200, no network, commands of at most ten minutes each, the machine given back when idle).
# Run from a checkout of this repository:
#
#   benchmarks/sglang-gpu/device.sh start SOURCES_DIR SECONDS
#       SOURCES_DIR holds sgl-kernel-0.3.21-sources.tar.xz, triton-kernels-v3.5.1.tar.xz and the FlashMLA bundle;
#       lays them out, writes env.txt, and starts the whole run in the background; SECONDS: when, from now, it must
#       be over. With SGLANG_GPU_TORCH_WHEELS=a directory of the stable lock's torch wheel and the NVIDIA libraries
#       whose locked versions the machine lacks, everything runs on that torch, installed into a copy of the
#       machine's venv (torch_venv); else on the machine's torch, named by SGLANG_GPU_TORCH.
#   benchmarks/sglang-gpu/device.sh install WHEEL_DIR...
#       installs carried wheels into the run's site directory (the stable lock's, less what the machine has)
#   benchmarks/sglang-gpu/device.sh wait SECONDS
#       until the run ends (or SECONDS pass); results.tar.gz in $OUT each time
#   benchmarks/sglang-gpu/device.sh accept ARGS...
#       `blackwell-stack acceptance --url` (ARGS added) against the attentive Llama, which the run holds until then
#
# The run (run-all): the compilers as the machine's environment names them, tried by `kernel build
# --dry-run` (its static-only GCC is refused); `kernel build --arch 9.0a` with the distribution's
# compilers (with SGLANG_GPU_REFERENCE=1 also, at the lowest CPU priority, `kernel build --arch 12.0a` in
# the fixed stage: the reference configuration; it slows the 9.0a build, so it wants a session of its
# own: SGLANG_GPU_REFERENCE=only builds it alone, with the whole machine, and serves nothing); once the 9.0a wheel is there: `inspect`, `doctor` (SGLang's start-up imports, each in a child
# process), then SGLang through `serve run`, each server started once the one before is ready: the attentive
# Llama (`smoke`), the all-`!` Llama (`smoke`), a tiny Qwen3.5-MoE with --load-format dummy (one completion,
# and with SGLANG_GPU_GSM8K=DIR the accuracy gate: random weights must fail it). The wheel comes back beside
# the results, in parts.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
W="${SGLANG_GPU_WORK:-/tmp/sglang-gpu}"
OUT="${OUT:-$PWD/out}"
PY="${SGLANG_GPU_PYTHON:-$(command -v python3)}"
# A torch other than the stable lock's, named to `kernel build --allow-torch` (empty: the lock's own, 2.12.1, which
# `start` installs from SGLANG_GPU_TORCH_WHEELS into a copy of the machine's venv)
TORCH_STANDIN="${SGLANG_GPU_TORCH:-}"
R="$W/results"
SITE="$W/site"
KSITE="$W/kernel-site"
MODELS="$W/models"
# The distribution's compilers: the machine's environment names a second GCC with a static libstdc++ only.
DIST=(CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++)
# The offline sources match every pin a 12.0a build reads (triton's triton_kernels from its own bundle); FlashMLA's
# cutlass, read by 9.0a only, lost git's executable bit on 19 headers (tests/test_kernel_source_filter.py).
MISMATCH=()
# NVLink multicast stays off wherever a program starts (the machine's notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"

cli() { PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m blackwell_stack "$@"; }
stamp() { echo "$(date -u +%FT%TZ) $(( $(date +%s) - $(cat "$W/t0") ))s $*" | tee -a "$R/timeline.txt"; }
left() { echo $(( $(cat "$W/deadline") - $(date +%s) )); }
pack() { tar -czf "$W/results.tar.gz.part" -C "$W" results && mv "$W/results.tar.gz.part" "$W/results.tar.gz"; }
serving_path() { echo "$KSITE:$SITE:$ROOT/src"; }

layout() {
  local sources="$1" src="$W/src"
  rm -rf "$src"; mkdir -p "$src"
  tar -xJf "$sources/sgl-kernel-0.3.21-sources.tar.xz" -C "$src"
  # repo-triton in that bundle is a placeholder; what its pin's filter keeps is triton-kernels-v3.5.1.tar.xz
  rm -rf "$src/fc/repo-triton"; tar -xJf "$sources/triton-kernels-v3.5.1.tar.xz" -C "$src"
  mv "$src/triton-kernels-v3.5.1" "$src/fc/repo-triton"
  tar -xJf "$sources"/flashmla-*.tar.xz -C "$src/fc"
  # The layout `kernel sources fetch` makes: FlashMLA's submodule apart under repo-flashmla.submodules/.
  mkdir -p "$src/fc/repo-flashmla.submodules/csrc"
  mv "$src/fc/repo-flashmla/csrc/cutlass" "$src/fc/repo-flashmla.submodules/csrc/cutlass"
  mkdir "$src/fc/repo-flashmla/csrc/cutlass"
}

build() {  # ARCH OUTDIR STAGE MEMORY_GIB NICE
  local arch="$1" out="$2" stage="$3" mem="$4" nice="$5" extra=()
  [ "$arch" = 9.0a ] && extra=(--allow-source-mismatch repo-flashmla.submodules/csrc/cutlass)
  local args=(kernel build --src "$W/src/sglang" --sources "$W/src/fc" --arch "$arch" --python "$PY"
    ${TORCH_STANDIN:+--allow-torch "$TORCH_STANDIN"} "${MISMATCH[@]}" "${extra[@]}" --out "$out" --jobs 16
    --memory-gib "$mem" --json)
  printf '%q ' "${DIST[@]}" blackwell-stack "${args[@]}" > "$R/build-$arch-command.txt"; echo >> "$R/build-$arch-command.txt"
  ( cd "$W" && env "${DIST[@]}" ${stage:+BLACKWELL_STACK_KERNEL_STAGE=$stage} nice -n "$nice" \
      env PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack "${args[@]}" > "$R/build-$arch.json" 2> "$R/build-$arch.err" )
}

wheel_record() {  # WHEEL PREFIX: sha256, members (name, sha256, size), the build record
  local wheel="$1" prefix="$2"
  sha256sum "$wheel" > "$R/$prefix-wheel.sha256"; stat -c %s "$wheel" >> "$R/$prefix-wheel.sha256"
  "$PY" - "$wheel" > "$R/$prefix-members.tsv" <<'EOF'
import hashlib, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    print("member\tsha256\tsize")
    for i in sorted(z.infolist(), key=lambda i: i.filename):
        if not i.is_dir():
            print(f"{i.filename}\t{hashlib.sha256(z.read(i)).hexdigest()}\t{i.file_size}")
EOF
  unzip -p "$wheel" sgl_kernel/_build_info.json > "$R/$prefix-build-info.json" || true
  cli inspect "$wheel" --json > "$R/$prefix-inspect.json" 2>&1 || true
}

wait_ready() { "$PY" "$HERE/http_probe.py" ready "$1" "$2"; }  # PORT SECONDS

serve() {  # NAME PORT MODEL [--set ...]: serve run with the profile's flags, less what cannot apply here
  local name="$1" port="$2" model="$3"; shift 3
  local args=(serve run --stack stable --python "$PY" --set model-path="$model" --set port="$port"
    --set mem-fraction-static=0.25 "$@")
  printf '%q ' blackwell-stack "${args[@]}" > "$R/serve-$name-command.txt"; echo >> "$R/serve-$name-command.txt"
  PYTHONPATH="$(serving_path)" setsid "$PY" -X faulthandler -m blackwell_stack "${args[@]}" \
    > "$R/serve-$name.log" 2>&1 < /dev/null &
  echo $! > "$W/serve-$name.pid"
}

stop_serve() { local pid; pid="$(cat "$W/serve-$1.pid" 2>/dev/null)" || return 0; kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; }

group_signal() {  # SIGNAL PIDFILE: the whole process group of a background build
  local pid; pid="$(cat "$1" 2>/dev/null)" || return 0
  kill "-$2" -- -"$pid" 2>/dev/null || true
}

run_all() {
  cd "$W"
  stamp "compilers as the machine names them (beside the build)"
  ( cd "$W" && env PYTHONPATH="$ROOT/src" "$PY" -m blackwell_stack kernel build --src "$W/src/sglang" --sources "$W/src/fc" \
      --arch 9.0a --python "$PY" ${TORCH_STANDIN:+--allow-torch "$TORCH_STANDIN"} "${MISMATCH[@]}" \
      --allow-source-mismatch repo-flashmla.submodules/csrc/cutlass --out "$W/dry" --dry-run \
      > "$R/compilers-default-env.txt" 2>&1 || echo "exit code $?" >> "$R/compilers-default-env.txt" ) &
  [ "${SGLANG_GPU_REFERENCE:-0}" = only ] && { reference_only; return; }
  if [ -n "${SGLANG_GPU_WHEEL_PARTS:-}" ]; then
    # A wheel an earlier session built and brought back in parts: build and serve do not fit one lease.
    local first; first="$(ls "$SGLANG_GPU_WHEEL_PARTS"/*.part-00 | head -1)"
    mkdir -p "$W/out90"; cat "${first%-00}"-* > "$W/out90/$(basename "${first%.part-00}")"
    stamp "9.0a wheel carried from $SGLANG_GPU_WHEEL_PARTS, not built"
  else
    stamp "build 9.0a start"
    setsid bash -c "$(declare -f build stamp); $(declare -p W R ROOT PY TORCH_STANDIN DIST MISMATCH); build 9.0a $W/out90 /tmp/blackwell-stack-sgl-kernel-90 ${SGLANG_GPU_MEMORY_GIB:-110} 0" \
      > "$W/build90.log" 2>&1 < /dev/null &
    echo $! > "$W/build90.pid"
  fi
  if [ "${SGLANG_GPU_REFERENCE:-0}" = 1 ]; then
    stamp "build 12.0a start (nice 19, the fixed stage)"
    setsid bash -c "$(declare -f build stamp); $(declare -p W R ROOT PY TORCH_STANDIN DIST MISMATCH); build 12.0a $W/out120 '' 40 19" \
      > "$W/build120.log" 2>&1 < /dev/null &
    echo $! > "$W/build120.pid"
  fi
  pack

  # The models, once the carried wheels are in (transformers 4.57.1 of the lock writes them).
  while [ ! -f "$W/site.done" ] && (( $(left) > 0 )); do sleep 5; done
  stamp "models"
  PYTHONPATH="$SITE" "$PY" "$HERE/make_models.py" "$MODELS" > "$R/models.txt" 2>&1 || stamp "models FAILED"

  while kill -0 "$(cat "$W/build90.pid")" 2>/dev/null; do sleep 5; done
  local wheel; wheel="$(ls "$W"/out90/sgl_kernel-*.whl 2>/dev/null | head -1 || true)"
  if [ -z "$wheel" ]; then stamp "build 9.0a FAILED"; cp "$W"/out90/*.log "$R/" 2>/dev/null || true; pack; return 1; fi
  stamp "9.0a wheel: $(basename "$wheel")"
  gzip -c "$W"/out90/sgl-kernel-build-*.log > "$R/build-9.0a.log.gz" 2>/dev/null || true
  wheel_record "$wheel" "9.0a"
  [ -z "${SGLANG_GPU_WHEEL_PARTS:-}" ] && mkdir -p "$W/wheel-parts" && split -b 15M -d "$wheel" "$W/wheel-parts/$(basename "$wheel").part-"
  [ "${SGLANG_GPU_SERVE:-1}" = 0 ] && { stamp "build only (SGLANG_GPU_SERVE=0)"; pack; return 0; }
  rm -rf "$KSITE"; "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$KSITE" "$wheel" > "$R/kernel-install.txt" 2>&1
  pack

  # Servers start one after another, each once the one before is ready: SGLang sizes its memory pool from what
  # was free when it started (model_runner.py: rest = free now - free at start x (1 - mem-fraction-static)), so
  # servers started at once each count the others' memory as free and stop with "Not enough memory" (the first
  # run). The `!` Llama and the Qwen3.5-MoE check answers, not speed: no CUDA graphs, to fit the lease.
  stamp "doctor and the attentive Llama"
  ( PYTHONPATH="$(serving_path)" "$PY" -m blackwell_stack doctor --python "$PY" --json > "$R/doctor.json" 2> "$R/doctor.err";
    echo "exit code $?" >> "$R/doctor.err" ) &
  serve attentive 30000 "$MODELS/attentive" --set quantization=null --set tensor-parallel-size=1 \
    ${SGLANG_GPU_NO_GRAPHS:+--set disable-cuda-graph=true}  # SGLANG_GPU_NO_GRAPHS=1: no capture, when the lease is short
  wait_ready 30000 400 && stamp "attentive ready" || stamp "attentive NOT ready"
  serve bang 30001 "$MODELS/bang" --set quantization=null --set tensor-parallel-size=1 --set disable-cuda-graph=true
  cli smoke http://127.0.0.1:30000 --model "$MODELS/attentive" --timeout 600 > "$R/smoke-attentive.txt" 2>&1 || true
  stamp "smoke attentive: $(tail -1 "$R/smoke-attentive.txt" | cut -c1-80)"
  touch "$W/attentive-smoked"  # `device.sh accept` may start now: its load does not touch smoke's verdict
  wait_ready 30001 300 && stamp "bang ready" || stamp "bang NOT ready"
  serve qwen 30002 "$MODELS/qwen3.5-moe" --set quantization=null --set tensor-parallel-size=1 \
    --set moe-runner-backend=null --set load-format=dummy --set disable-cuda-graph=true
  cli smoke http://127.0.0.1:30001 --model "$MODELS/bang" --timeout 600 > "$R/smoke-bang.txt" 2>&1 || true
  stamp "smoke bang: $(tail -1 "$R/smoke-bang.txt" | cut -c1-80)"
  wait_ready 30002 300 && stamp "qwen ready" || stamp "qwen NOT ready"
  "$PY" "$HERE/http_probe.py" complete 30002 "$MODELS/qwen3.5-moe" "$R/qwen-answer.json" || true
  stamp "qwen answer: $(head -c 80 "$R/qwen-answer.json" 2>/dev/null)"
  if [ -n "${SGLANG_GPU_GSM8K:-}" ]; then  # random weights: the gate must fail them, for their score
    cli accuracy http://127.0.0.1:30002 --model "$MODELS/qwen3.5-moe" --data "$SGLANG_GPU_GSM8K" \
      --questions "${SGLANG_GPU_GATE_QUESTIONS:-64}" --concurrency 64 --json > "$R/accuracy-qwen.json" \
      2> "$R/accuracy-qwen.err" || true
    stamp "gate on the random Qwen3.5-MoE: $(tail -1 "$R/accuracy-qwen.err" | cut -c1-80)"
  fi
  stop_serve bang; stop_serve qwen
  pack

  # The attentive Llama stays up for `device.sh accept` (a call of its own, so it runs the checkout as that call
  # brings it; it starts once smoke is done, beside the `!` Llama and the Qwen3.5-MoE, to fit the lease),
  # until that step is over or the run's time is.
  stamp "attentive held for the acceptance step"
  while [ ! -f "$W/release" ] && (( $(left) > 0 )); do sleep 5; done
  stop_serve attentive
  wait || true
  pack

  if [ -f "$W/build120.pid" ]; then
    while kill -0 "$(cat "$W/build120.pid")" 2>/dev/null && (( $(left) > 0 )); do sleep 5; done
    wheel="$(ls "$W"/out120/sgl_kernel-*.whl 2>/dev/null | head -1 || true)"
    if [ -n "$wheel" ]; then stamp "build 12.0a done"; wheel_record "$wheel" "12.0a"
      gzip -c "$W"/out120/sgl-kernel-build-*.log > "$R/build-12.0a.log.gz" || true
    else stamp "build 12.0a not done"; cp "$W"/out120/*.log "$R/" 2>/dev/null || true; fi
  fi
  pack
}

reference_only() {  # SGLANG_GPU_REFERENCE=only: the 12.0a build alone, with the whole machine, nothing served
  stamp "build 12.0a start (the fixed stage, alone)"
  build 12.0a "$W/out120" '' "${SGLANG_GPU_MEMORY_GIB:-110}" 0 || true
  local wheel; wheel="$(ls "$W"/out120/sgl_kernel-*.whl 2>/dev/null | head -1 || true)"
  if [ -n "$wheel" ]; then
    stamp "build 12.0a done: $(basename "$wheel")"; wheel_record "$wheel" "12.0a"
    gzip -c "$W"/out120/sgl-kernel-build-*.log > "$R/build-12.0a.log.gz" || true
    mkdir -p "$W/wheel-parts" && split -b 15M -d "$wheel" "$W/wheel-parts/$(basename "$wheel").part-"
  else stamp "build 12.0a FAILED"; cp "$W"/out120/*.log "$R/" 2>/dev/null || true; fi
  pack
}

# The stable lock's torch in a copy of the machine's venv, with the lock's NVIDIA libraries that torch 2.12.1 needs
# newer than the machine's (NCCL 2.29.7: ncclCommResume; the machine's cuDNN 9.19 and cuSPARSELt 0.8.0 define every
# symbol its libraries need from them, by nm -D): overlay_venv.py links every other entry of the machine's
# site-packages in, so its other CUDA 13.0 libraries serve torch's import through its RUNPATH.
torch_venv() {  # WHEEL_DIR DEST
  "${SGLANG_GPU_BASE_PYTHON:-$(command -v python3)}" "$HERE/overlay_venv.py" "${SGLANG_GPU_BASE_PYTHON:-$(command -v python3)}" \
    "$2" "$ROOT/stacks/stable/uv.lock" "$1"/*.whl || return 1
  ls "$1" > "$R/torch-venv-wheels.txt"
  "$2/bin/python3" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())'
}

start() {
  local sources="$1" seconds="$2"
  # run-all works from $W: a carried wheel's directory, named from the checkout, must not depend on that.
  [ -n "${SGLANG_GPU_WHEEL_PARTS:-}" ] && export SGLANG_GPU_WHEEL_PARTS="$(cd "$SGLANG_GPU_WHEEL_PARTS" && pwd)"
  [ -n "${SGLANG_GPU_GSM8K:-}" ] && export SGLANG_GPU_GSM8K="$(cd "$SGLANG_GPU_GSM8K" && pwd)"
  rm -rf "$W"; mkdir -p "$W" "$R" "$SITE"
  date +%s > "$W/t0"; echo $(( $(date +%s) + seconds )) > "$W/deadline"
  if [ -n "${SGLANG_GPU_TORCH_WHEELS:-}" ]; then
    torch_venv "$SGLANG_GPU_TORCH_WHEELS" "$W/venv-torch" > "$R/torch-venv.txt" 2>&1 || { cat "$R/torch-venv.txt"; return 1; }
    PY="$W/venv-torch/bin/python3"; export SGLANG_GPU_PYTHON="$PY"
  fi
  {
    echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)"; free -g | sed -n 2p; uname -r
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
    (command -v nvcc > /dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version) | tail -2
    cmake --version | head -1; ninja --version; ld --version | head -1
    echo "PY=$PY"; "$PY" -c 'import torch, triton, scikit_build_core as s; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "scikit-build-core", s.__version__)'
    for v in CXX CC CUDAHOSTCXX; do
      c="${!v:-}"; echo "$v=${c:-(unset)}"
      [ -n "$c" ] && { "$c" --version | head -1; echo "  -print-file-name=libstdc++.so: $("$c" -print-file-name=libstdc++.so)"; }
    done
    echo "/usr/bin/g++: $(/usr/bin/g++ --version | head -1)"; echo "  -print-file-name=libstdc++.so: $(/usr/bin/g++ -print-file-name=libstdc++.so)"
  } > "$R/env.txt" 2>&1 || true
  cat "$R/env.txt"
  layout "$sources"
  stamp "laid out"
  command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  setsid nohup bash "$0" run-all > "$W/driver.log" 2>&1 < /dev/null &
  echo "$!" > "$W/driver.pid"
  sleep 15; tail -5 "$W/driver.log"; tail -3 "$R/timeline.txt"
}

install() {
  local dir
  for dir in "$@"; do
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$dir"/*.whl \
      >> "$R/wheels-install.txt" 2>&1 && stamp "installed $(ls "$dir" | wc -l) wheels from $dir" || stamp "install FAILED: $dir"
    ls "$dir" >> "$R/wheels.txt"
  done
  [ "$(wc -l < "$R/wheels.txt")" -ge "${SGLANG_GPU_WHEELS:-135}" ] && touch "$W/site.done" && stamp "all wheels in"
  return 0
}

wait_for() {
  local limit="$1" t0; t0="$(date +%s)"
  while kill -0 "$(cat "$W/driver.pid")" 2>/dev/null && (( $(date +%s) - t0 < limit )); do
    local log step="-"
    log="$(ls "$W"/out*/sgl-kernel-build-*.log 2>/dev/null | head -1 || true)"
    [ -n "$log" ] && step="$(grep -oE '^ *\[[0-9]+/[0-9]+\]' "$log" | tail -1 | tr -d ' ' || true)"
    echo "$(( $(date +%s) - $(cat "$W/t0") ))s ${log:+$(basename "$(dirname "$log")")} ${step:--} $(free -g | awk '/Mem:/{print "used " $3 " GiB"}') $(tail -1 "$R/timeline.txt") | $(tail -1 "$R/acceptance.err" 2>/dev/null | cut -c1-100)"
    sleep 20
  done
  tail -12 "$R/timeline.txt"
  [ -f "$W/results.tar.gz" ] && cp "$W/results.tar.gz" "$OUT/results.tar.gz"
  [ -d "$W/wheel-parts" ] && cp "$W"/wheel-parts/* "$OUT/"
  ls -la "$OUT"
}

accept() {  # ARGS...: accept-run in the background (it may outlast a call), then what `wait` does
  setsid nohup bash "$0" accept-run "$@" > "$W/accept.log" 2>&1 < /dev/null &
  sleep 5; wait_for "${SGLANG_GPU_ACCEPT_CALL:-540}"
}

accept_run() {  # ARGS...: `blackwell-stack acceptance --url` against the attentive Llama the run holds, then releases it
  local py="$W/venv-torch/bin/python3"; [ -x "$py" ] || py="$PY"
  local t0; t0="$(date +%s)"
  while [ ! -f "$W/attentive-smoked" ] && (( $(date +%s) - t0 < ${SGLANG_GPU_ACCEPT_WAIT:-400} )); do sleep 3; done
  [ -f "$W/attentive-smoked" ] || { stamp "attentive not smoked in time for the acceptance step"; touch "$W/release"; return 1; }
  stamp "acceptance start"
  printf '%q ' blackwell-stack acceptance --url http://127.0.0.1:30000 --python "$py" "$@" > "$R/acceptance-command.txt"
  echo >> "$R/acceptance-command.txt"
  ( cd "$W" && PYTHONPATH="$(serving_path)" "$py" -m blackwell_stack acceptance --url http://127.0.0.1:30000 \
      --python "$py" "$@" > "$R/acceptance.out" 2> "$R/acceptance.err"; echo "exit code $?" >> "$R/acceptance.err" )
  stamp "acceptance: $(tail -1 "$R/acceptance.err")"
  touch "$W/release"; pack
}

case "${1:-}" in
  start) start "$2" "$3" ;;
  run-all) run_all ;;
  install) shift; install "$@" ;;
  wait) pack 2>/dev/null || true; wait_for "${2:-540}" ;;
  accept) shift; accept "$@" ;;
  accept-run) shift; accept_run "$@" ;;
  *) echo "usage: $0 start SOURCES_DIR SECONDS | install WHEEL_DIR... | wait SECONDS | accept ARGS..." >&2; exit 2 ;;
esac
