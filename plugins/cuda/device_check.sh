#!/bin/bash
# device_check.sh — run the cuda plugin's checks on a GPU machine that lacks
# this project's build dependencies (see README.md, "Measured on an H200").
#
#   plugins/cuda/device_check.sh pack BUILD DIR   # here: bundle binaries + libs into DIR
#   DIR/device_check.sh run [OUT]                 # there: htr-info, htr-conform, plugin tests
#
# pack copies htr-info, htr-conform, test_plugins, libhtr, libhtr_cuda.so, the
# non-glibc libraries they link (fmt, libstdc++, libgcc_s), and this
# machine's glibc with its loader (used only when the GPU machine's glibc is
# older than the one the binaries were linked against). DIR stays well under
# 64 MiB (debug info stripped). test_plugins dlopens the plugin by its build
# path, so carry BUILD/plugins/cuda along for it.
set -euo pipefail
case "${1:-}" in
pack)
  B=$2 D=$3
  mkdir -p "$D/bin" "$D/lib" "$D/glibc" "$D/plugins"
  cp -L "$B/tools/htr-conform/htr-conform" "$B/tools/htr-info/htr-info" \
        "$B/tests/plugins/test_plugins" "$D/bin/"
  cp -L "$B/runtime/libhtr.so.1" "$D/lib/"
  for l in libfmt.so.9 libstdc++.so.6 libgcc_s.so.1; do
    cp -L "$(ldd "$B/runtime/libhtr.so.1" | awk -v l=$l '$1==l {print $3}')" "$D/lib/"
  done
  for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
    cp -L "/lib/x86_64-linux-gnu/$l" "$D/glibc/"
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$D/glibc/"
  cp -L "$B/plugins/cuda/libhtr_cuda.so" "$D/plugins/"
  strip --strip-debug "$D"/bin/* "$D/lib/libhtr.so.1" "$D/plugins/libhtr_cuda.so"
  cp "$0" "$D/device_check.sh"
  du -sh "$D"
  ;;
run)
  D=$(cd "$(dirname "$0")" && pwd)
  OUT=${2:-${OUT:-/tmp/htr-cuda-check}}
  mkdir -p "$OUT"
  glibc=$(ldd --version | head -1 | grep -oE '[0-9]+\.[0-9]+$')
  echo "host glibc $glibc"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3 || true
  if [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" = "2.36" ]; then
    run() { LD_LIBRARY_PATH="$D/lib" "$@"; }
  else
    echo "using the bundled glibc loader"
    run() { "$D/glibc/ld-linux-x86-64.so.2" --library-path "$D/lib:$D/glibc" "$@"; }
  fi
  export HTR_PLUGIN_PATH="$D/plugins"
  echo '$ htr-info'
  run "$D/bin/htr-info" 2>&1 | tee "$OUT/htr-info.txt"
  echo '$ htr-conform --plugin libhtr_cuda.so'
  set +e
  run "$D/bin/htr-conform" --plugin "$D/plugins/libhtr_cuda.so" \
      --json "$OUT/conform-cuda.json" 2>&1 | tee "$OUT/conform-cuda.txt"
  rc=${PIPESTATUS[0]}
  echo "conform rc=$rc"
  echo '$ test_plugins [cuda]'
  run "$D/bin/test_plugins" "[cuda]" 2>&1 | tail -30
  exit "$rc"
  ;;
*)
  sed -n 2,13p "$0"
  exit 2
  ;;
esac
