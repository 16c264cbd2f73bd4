#!/usr/bin/env bash
# tools/train.sh — install what htr needs, build it into build/, and train a
# GPT-2 end to end on the best device found: the `tiny` preset on a CPU (a few
# minutes on 2 cores), `small` when a GPU plugin has a device. Extra
# arguments go to htr-train (e.g. --steps 200, --device cpu:0, --preset tiny).
#
# Environment: HTR_BUILD_DIR (default build), HTR_TRAIN_OUT (default train-out).
#
# Checks the result: the final validation loss must be well below the
# corpus's unigram (byte-frequency) entropy, printed in nats.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="meson ninja-build pkg-config g++ catch2 libfmt-dev libdnnl-dev libopenblas-dev libhwloc-dev
libffi-dev libdlpack-dev nlohmann-json3-dev fortunes"
missing=()
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "train.sh: installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "train.sh: missing packages; run:"
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}"
    exit 1
  fi
fi

build=${HTR_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build"
fi
# Build htr-train and the device plugins only (the test suites are not needed).
targets=$(meson introspect "$build" --targets | python3 -c '
import json, os, sys
build = os.path.realpath(sys.argv[1])
for t in json.load(sys.stdin):
    f = t["filename"][0]
    if t["name"] == "htr-train" or (t["type"] in ("shared_module", "shared_library") and
                                    "/plugins/" in f):
        print(os.path.relpath(f, build))
' "$build")
ninja -C "$build" -j2 $targets

out=${HTR_TRAIN_OUT:-train-out}
mkdir -p "$out"
log="$out/train.log"
# The progress bar is drawn on stderr when it is a terminal; stdout is kept.
"$build"/samples/htr-train/htr-train --preset auto --out-dir "$out" "$@" | tee "$log"

final=$(sed -n 's/.*final validation loss \([0-9.]*\) nats (unigram entropy \([0-9.]*\) nats).*/\1 \2/p' "$log" | tail -1)
if [ -z "$final" ]; then
  echo "train.sh: no validation loss in $log"
  exit 1
fi
read -r val unigram <<<"$final"
python3 - "$val" "$unigram" <<'PY'
import sys
val, uni = map(float, sys.argv[1:])
print(f"train.sh: validation loss {val:.4f} nats vs unigram entropy {uni:.4f} nats "
      f"({uni - val:.4f} nats below, {100 * (uni - val) / uni:.0f}%)")
if val > 0.8 * uni:
    print("train.sh: FAIL: validation loss is not well below the unigram entropy")
    sys.exit(1)
print("train.sh: OK: the model learned more than byte frequencies")
PY
echo "train.sh: plot $out/loss.svg, CSV $out/loss.csv, checkpoint $out/checkpoint.safetensors,"
echo "          weights $out/model.safetensors, sample $out/sample.txt, log $log"
