#!/usr/bin/env bash
# The GPU check (issue 31, "On a lent GPU"): whoever is lent a GPU runs this first. Each stage runs
# under its own timeout and the markdown summary (gpu_check.md) is rewritten after every stage, so
# a run cut short still leaves what it found; the whole check fits in 5 minutes so a rerun fits too
# (each stage's timeout is cut to what is left of 285 s, or of $GPU_CHECK_BUDGET_S; a stage with
# under 15 s left is skipped, and the check fails).
#
#   bench/gpu_check.sh [--dry] [OUTDIR]     (OUTDIR: default $OUT, else ./gpu-check)
#
# Stages: probe the device (driver, arch, the runtime's first launch), `pytest -m gpu`, the benches of
# issue 31's table: MNIST MLP and CNN train steps (bench/gpu_step.py --quick), memory-bound kernels
# against the copy bandwidth (bench/gpu_bandwidth.py), Llama decode at TinyLlama's shape
# (bench/gpu_decode.py), then each kernel's schedules timed on the device (bench/gpu_schedules.py).
# --dry: the simulated device (cuda-emulated) and tiny sizes, for CI and for trying the script without
# a GPU (tests/test_gpu_check.py runs it). The device machine has no package registry:
# ../shared/device/wheels.sh fetches the wheels to carry, and prints the line to start with.
set -uo pipefail
dry=0
out="${OUT:-gpu-check}"
for arg in "$@"; do
  case "$arg" in
    --dry) dry=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) out="$arg" ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p "$out"
summary="$out/gpu_check.md"
py="${PYTHON:-python3}"
rows=()
details=()
failed=0
# the whole check's seconds: 5 minutes less 15 s of slack (a stage's limit also leaves its 10 s of --kill-after)
BUDGET_S="${GPU_CHECK_BUDGET_S:-285}"
case "$BUDGET_S" in
  ''|*[!0-9]*) echo "GPU_CHECK_BUDGET_S must be a whole number of seconds, got '$BUDGET_S'" >&2; exit 2 ;;
esac

write_summary() {
  {
    echo "# GPU check ($( [ $dry = 1 ] && echo "dry run: simulated device" || echo "device" )), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "| stage | status | seconds |"
    echo "|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    printf '%s\n' "${details[@]}"
  } > "$summary"
}

# stage NAME TIMEOUT_S COMMAND...: runs it, logs to $out/NAME.log, adds a row and the log's tail
stage() {
  local name="$1" limit="$2"; shift 2
  local start=$SECONDS status left=$((BUDGET_S - SECONDS - 10))  # (10: timeout's --kill-after)
  if [ $left -lt 15 ]; then
    rows+=("| $name | skipped: $((BUDGET_S - SECONDS))s left of the check's ${BUDGET_S}s | 0 |")
    failed=1
    write_summary
    echo "$name: skipped (the check's ${BUDGET_S}s are spent)"
    return
  fi
  [ "$limit" -gt $left ] && limit=$left
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  case $rc in
    0) status=ok ;;
    124|137) status="timed out after ${limit}s"; failed=1 ;;
    *) status="failed (exit $rc)"; failed=1 ;;
  esac
  rows+=("| $name | $status | $((SECONDS - start)) |")
  details+=("## $name" "" '```' "$(tail -n 40 "$out/$name.log")" '```' "")
  write_summary
  echo "$name: $status"
}

if [ $dry = 1 ]; then
  stage probe 60 "$py" -c "
import numpy as np, luminal as lm
from luminal.backends.cuda import runtime as rt
print('cuda:', lm.cuda.status())
g = lm.Graph(); x = g.input('x', (8,))
f = lm.compile(x * 2.0, backend='cuda-emulated')
assert (f(x=np.ones(8, np.float32)) == 2).all()
print('simulated device: first launch ok,', rt.simulated().device.launches, 'launch(es)')"
  stage tests 120 "$py" -m pytest -p no:cacheprovider -n 0 -q -x -m "" tests/cuda/test_simulated_device.py  # (-m "": both tiers)
  stage benches 120 "$py" bench/gpu_step.py --dry
  stage bandwidth 60 "$py" bench/gpu_bandwidth.py --dry
  stage decode 60 "$py" bench/gpu_decode.py --dry
  stage schedules 60 "$py" bench/gpu_schedules.py --dry
else
  stage probe 90 "$py" -c "
import numpy as np, luminal as lm
from luminal.backends.cuda import driver, runtime as rt
ok, why = lm.cuda.status(); print('cuda:', ok, why)
assert ok, why
print('arch:', driver.device_arch(0))
from luminal.backends.cuda import cublaslt
print('cuBLASLt:', 'loaded' if cublaslt.load() is not None else 'not found (products run as own kernels): ' + cublaslt.why())
g = lm.Graph(); x = g.input('x', (8,))
f = lm.compile(x * 2.0, backend='cuda')
assert (f(x=np.ones(8, np.float32)) == 2).all() and (f(x=np.ones(8, np.float32)) == 2).all()
print('runtime: launch by launch and replayed, ok')"
  stage tests 150 "$py" -m pytest -p no:cacheprovider -n 0 -q -m gpu tests/cuda tests/codegen  # (no -x: every failure in one run)
  stage benches 90 "$py" bench/gpu_step.py --quick
  stage bandwidth 60 "$py" bench/gpu_bandwidth.py
  stage decode 120 "$py" bench/gpu_decode.py
  stage schedules 60 "$py" bench/gpu_schedules.py
fi
echo "summary: $summary"
exit $failed
