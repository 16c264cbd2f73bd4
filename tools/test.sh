#!/usr/bin/env bash
# tools/test.sh — build htr and run every test: the Meson suites and the
# conformance kit on every plugin that has a device; with HTR_TEST_ASAN=1 also
# the same Meson suites again under ASan+UBSan. Ends with one line
# "N passed, N failed" (summed over everything run) and exits non-zero when
# anything failed.
#
# Environment:
#   HTR_TEST_ASAN=1      also build build-asan/ (address,undefined) and run the
#                        Meson suites there: a second full build, slower than the
#                        rest together on 2 cores, so a flag (run it before landing
#                        changes to the runtime, the plugins or the scheduler)
#   HTR_TEST_JOBS=N      build and test parallelism (default 2)
#   HTR_TEST_WERROR=0    build without -Dwerror=true (default: werror on, as in CI)
#   HTR_TEST_BUILD_DIR=D, HTR_TEST_ASAN_DIR=D
#                        build directories (default build/ and build-asan/);
#                        both are reconfigured when they exist
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
JOBS=${HTR_TEST_JOBS:-2}
WERROR=true
[[ "${HTR_TEST_WERROR:-1}" == 0 ]] && WERROR=false
B=${HTR_TEST_BUILD_DIR:-build}
BA=${HTR_TEST_ASAN_DIR:-build-asan}

PASSED=0
FAILED=0
declare -a REPORT=()
# What failed tests printed last, repeated above the summary (tools/test_failures.py).
FAILURES=$(mktemp)
trap 'rm -f "$FAILURES"' EXIT

note() { printf '\n==== %s\n' "$*"; }
record() {  # record <stage> <passed> <failed>
  PASSED=$((PASSED + $2))
  FAILED=$((FAILED + $3))
  REPORT+=("$(printf '%-34s %5d passed %5d failed' "$1" "$2" "$3")")
}

# ------------------------------------------------------------- packages
PKGS=(meson ninja-build pkg-config g++ catch2 libfmt-dev libdnnl-dev libopenblas-dev
      libhwloc-dev libffi-dev libdlpack-dev nlohmann-json3-dev python3-torch python3-numpy
      python3-pip fortunes
      # data parallel across processes (tests/comm, issue 34): mpirun and libmpi.so.40
      openmpi-bin libopenmpi-dev
      chromium  # tests/profiler: htr-prof --html checked in headless Chromium
      # vulkan plugin on Mesa's lavapipe (CPU Vulkan device): the loader, shaderc +
      # glslang + SPIRV-Tools archives, the driver and the Khronos validation layer
      libvulkan-dev libshaderc-dev spirv-tools glslang-dev mesa-vulkan-drivers
      vulkan-validationlayers)
# The main build has the vulkan plugin: meson's `vulkan` suite runs its tests,
# `htr-conform --plugin vulkan` and vulkan-train-parity (50 steps of
# `htr-train --device vulkan:0 --preset tiny --data-order sequential`, losses
# within 1e-3 of cpu; 255 s measured on 2 cores with cold caches, the longest
# vulkan test) under VK_LAYER_KHRONOS_validation (any validation message
# fails), and the conformance loop below runs conformance again. The ASan
# build leaves it out: lavapipe's JIT-compiled shaders and Mesa's own
# allocations are not ours to sanitize.
VULKAN_OPT=-Dvulkan=enabled
VULKAN_ASAN_OPT=-Dvulkan=disabled
missing=()
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    note "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y "${PKGS[@]}"
  else
    echo "tools/test.sh: missing Debian packages: ${missing[*]}" >&2
    echo "run as root:  apt-get update && apt-get install -y ${PKGS[*]}" >&2
    exit 1
  fi
fi

# safetensors (PyPI) is the independent reader our checkpoints are checked
# against (tests/train/safetensors_interop.py); Debian 12 does not package it.
if ! /usr/bin/python3 -c 'import safetensors' 2>/dev/null; then
  if [[ $(id -u) -eq 0 ]]; then
    note "installing safetensors for /usr/bin/python3 (pip)"
    /usr/bin/python3 -m pip install --quiet --break-system-packages safetensors
  else
    echo "tools/test.sh: the safetensors interop test will be skipped; to run it:" >&2
    echo "  /usr/bin/python3 -m pip install --user --break-system-packages safetensors" >&2
  fi
fi

# pytest runs the python suite (tests/python: the python/htr bindings);
# without it that suite fails and says how to install it.
if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  if [[ $(id -u) -eq 0 ]]; then
    note "installing pytest for /usr/bin/python3 (pip)"
    /usr/bin/python3 -m pip install --quiet --break-system-packages pytest
  else
    echo "tools/test.sh: the python suite needs pytest; to install it:" >&2
    echo "  /usr/bin/python3 -m pip install --user --break-system-packages pytest" >&2
  fi
fi

# tokenizers and transformers (PyPI) are the references for htr-train's byte-level BPE and
# Hugging Face checkpoints (tests/train/tokenizer_test.py, hf_checkpoint_test.py). transformers
# 4.46.3 runs on Debian 12's python3-torch 1.13 (5.x needs torch >= 2.6 and then offers no
# models), with tokenizers 0.20.3. They go into build-pydeps/hf, which those tests put first
# on their PYTHONPATH (tests/train/meson.build), not into the system's site-packages: an older
# huggingface_hub there would break packages that need a newer one.
HF_DEPS=$ROOT/build-pydeps/hf
HF_PROBE='import tokenizers, torch; from transformers import GPT2Config as C, GPT2LMHeadModel as M
M(C(n_layer=1, n_embd=8, n_head=1, n_positions=8, vocab_size=8))'
if ! PYTHONPATH=$HF_DEPS /usr/bin/python3 -c "$HF_PROBE" >/dev/null 2>&1; then
  note "installing transformers 4.46.3 and tokenizers into $HF_DEPS (pip)"
  # --no-deps with the pure-Python dependencies named: pip --target would otherwise add its own
  # NumPy, which Debian's torch was not built against.
  if ! /usr/bin/python3 -m pip install --quiet --no-warn-conflicts --no-deps --target "$HF_DEPS" --upgrade \
      "transformers==4.46.3" "tokenizers==0.20.3" "huggingface_hub==0.36.2" regex tqdm pyyaml filelock \
      fsspec requests packaging typing_extensions urllib3 idna charset_normalizer certifi safetensors; then
    echo "tools/test.sh: the tokenizer and Hugging Face checkpoint tests will be skipped; to run them:" >&2
    echo "  (the pip install above, into $HF_DEPS)" >&2
  fi
fi

# -------------------------------------------------------------- helpers
# setup_build <dir> [meson options...]: configure or reconfigure.
setup_build() {
  local dir=$1
  shift
  if [[ -d "$dir" && -f "$dir/build.ninja" ]]; then
    meson setup --reconfigure "$dir" -Dwerror="$WERROR" "$@"
  else
    rm -rf "$dir"
    meson setup "$dir" -Dwerror="$WERROR" "$@"
  fi
}

# run_meson_tests <label> <dir> [meson test options...]: runs all suites and
# records meson's own summary counts.
run_meson_tests() {
  local label=$1 dir=$2
  shift 2
  local log="$dir/test-sh-meson-test.log"
  set +e
  meson test -C "$dir" --num-processes "$JOBS" --print-errorlogs "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local ok xfail fail upass timeout
  ok=$(sed -n 's/^Ok:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
  xfail=$(sed -n 's/^Expected Fail:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
  fail=$(sed -n 's/^Fail:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
  upass=$(sed -n 's/^Unexpected Pass:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
  timeout=$(sed -n 's/^Timeout:[[:space:]]*\([0-9]*\).*/\1/p' "$log" | tail -1)
  local p=$(( ${ok:-0} + ${xfail:-0} ))
  local f=$(( ${fail:-0} + ${upass:-0} + ${timeout:-0} ))
  if [[ $rc -ne 0 && $f -eq 0 ]]; then
    f=1  # meson test itself failed (no summary): count it
  fi
  # A test whose only fault is LeakSanitizer's tracer crashing at exit (a
  # sanitizer-runtime flake, tools/lsan_tracer_flake.py) is rerun once; it
  # counts as passed only if the rerun passes.
  local json flaky
  json=$(ls -t "$dir"/meson-logs/testlog*.json 2>/dev/null | head -1)
  if [[ $f -gt 0 && -n "$json" ]]; then
    "$ROOT/tools/test_failures.py" "$label" "$json" >>"$FAILURES" 2>&1 || true
    flaky=$("$ROOT/tools/lsan_tracer_flake.py" "$json" 2>/dev/null || true)
    for t in $flaky; do
      note "$t: LeakSanitizer tracer crashed at exit after the test ran; rerunning it once"
      if meson test -C "$dir" --print-errorlogs "$@" "$t" >>"$log" 2>&1; then
        echo "$t: rerun passed"
        echo "---- $label: $t passed when rerun once (counted as passed)" >>"$FAILURES"
        p=$((p + 1))
        f=$((f - 1))
      else
        echo "$t: rerun failed too (see $log)"
      fi
    done
  fi
  record "$label" "$p" "$f"
}

build() {  # build <label> <dir>
  local t0=$SECONDS
  if ninja -C "$2" -j "$JOBS"; then
    echo "built $2 in $((SECONDS - t0)) s"
    return 0
  fi
  record "$1 (build)" 0 1
  return 1
}

# ----------------------------------------------------------- main build
T0=$SECONDS
note "configure $B/"
if setup_build "$B" "$VULKAN_OPT"; then
  note "build $B/ (-j$JOBS)"
  if build "build" "$B"; then
    note "meson test ($B/)"
    run_meson_tests "meson test" "$B"

    note "htr-conform on every plugin with a device"
    INFO=$B/tools/htr-info/htr-info
    CONFORM=$B/tools/htr-conform/htr-conform
    if [[ -x "$INFO" && -x "$CONFORM" ]]; then
      set +e
      targets=$("$INFO" --json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["plugins"]:
    if p.get("device_count", 0) > 0:
        print(p["name"], p["path"])
')
      info_rc=$?
      set -e
      if [[ $info_rc -ne 0 ]]; then
        record "htr-info --json" 0 1
      fi
      while read -r name path; do
        [[ -n "${name:-}" ]] || continue
        out="$B/conform-$name.json"
        set +e
        "$CONFORM" --plugin "$path" --json "$out"
        rc=$?
        set -e
        summary=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(s["passed"], s["failed"])' "$out" 2>/dev/null || echo "0 1")
        read -r cp cf <<<"$summary"
        if [[ $rc -ne 0 && $cf -eq 0 ]]; then cf=1; fi  # crashed or bad exit
        record "htr-conform $name" "$cp" "$cf"
      done <<<"$targets"
    else
      echo "htr-info or htr-conform not built" >&2
      record "htr-conform (not built)" 0 1
    fi
  fi
else
  record "configure $B/" 0 1
fi
echo "main build and tests: $((SECONDS - T0)) s"

# ------------------------------------------------------- ASan + UBSan
if [[ "${HTR_TEST_ASAN:-0}" == 1 ]]; then
  T1=$SECONDS
  note "configure $BA/ (address,undefined)"
  if setup_build "$BA" "$VULKAN_ASAN_OPT" -Db_sanitize=address,undefined -Db_lundef=false; then
    note "build $BA/ (-j$JOBS)"
    if build "asan" "$BA"; then
      note "meson test --setup=asan ($BA/)"
      run_meson_tests "meson test --setup=asan" "$BA" --setup=asan
    fi
  else
    record "configure $BA/" 0 1
  fi
  echo "asan build and tests: $((SECONDS - T1)) s"
else
  note "ASan+UBSan pass not run (HTR_TEST_ASAN=1 runs it)"
fi

if [[ -s "$FAILURES" ]]; then
  note "failed tests, the end of what each printed"
  cat "$FAILURES"
fi

note "summary ($((SECONDS)) s)"
for line in "${REPORT[@]}"; do echo "  $line"; done
echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
