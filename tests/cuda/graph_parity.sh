#!/bin/bash
# graph_parity.sh — whole-step graphs on a GPU (scheduler/step_graph.h): the same htr-train run
# eagerly (HTR_GRAPHS=0) and with the step captured once and replayed, and the losses compared
# (relative difference <= TOL, default 1e-6). Exit 0 when they agree, 1 when not, 77 (skipped)
# when the device is missing.
#
#   tests/cuda/graph_parity.sh HTR_TRAIN OUT_DIR [DEVICE] [STEPS] [extra htr-train flags...]
#
# HTR_TRAIN is word-split, so it may carry a prefix (`env LD_LIBRARY_PATH=... path/htr-train`).
# Prints the two losses per step, the worst relative difference, tokens/s of both runs and the
# executor's capture log line.
set -u
TRAIN=$1 OUT=$2 DEV=${3:-cuda:0} STEPS=${4:-20}
shift $(( $# < 4 ? $# : 4 ))
TOL=${TOL:-1e-6}
mkdir -p "$OUT"
A=(--device "$DEV" --preset tiny --steps "$STEPS" --seed 1337 --eval-every 0 --sample-tokens 0
   --data-order sequential --progress plain --print-every 5 "$@")
run_train() {  # $1 = label, $2 = HTR_GRAPHS value
  local dir="$OUT/$1"
  mkdir -p "$dir"
  HTR_GRAPHS=$2 HTR_LOG=info $TRAIN "${A[@]}" --out-dir "$dir" > "$OUT/$1.log" 2>&1
  local rc=$?
  echo "== $1 (HTR_GRAPHS=$2): rc=$rc"
  grep -E "step graph|captured the run|htr-train: .* steps in" "$OUT/$1.log" | head -5
  return $rc
}
run_train eager 0 || { tail -20 "$OUT/eager.log"; grep -q "no device\|not found" "$OUT/eager.log" && exit 77; exit 1; }
run_train graphs 1 || { tail -20 "$OUT/graphs.log"; exit 1; }
awk -F, -v tol="$TOL" '
  FNR == 1 { next }
  NR == FNR { e[$1] = $2; next }
  ($1 in e) {
    d = $2 - e[$1]; if (d < 0) d = -d
    m = e[$1] < 0 ? -e[$1] : e[$1]
    r = m > 0 ? d / m : d
    if (r > worst) worst = r
    n++
    printf "step %s eager %s graphs %s rel %.3g\n", $1, e[$1], $2, r
  }
  END {
    printf "compared %d steps, worst relative difference %.3g (tolerance %s)\n", n, worst, tol
    exit (n > 0 && worst <= tol) ? 0 : 1
  }' "$OUT/eager/loss.csv" "$OUT/graphs/loss.csv"
