#!/bin/bash
# device_check.sh — run the cuda plugin's checks on a GPU machine that lacks
# this project's build dependencies (see README.md, "Measuring on a GPU machine").
#
#   plugins/cuda/device_check.sh pack BUILD DIR   # here: bundle binaries + libs into DIR
#   DIR/device_check.sh run [OUT]                 # there: everything below
#   DIR/device_check.sh bench [OUT]               # there: the benches only
#   DIR/device_check.sh comm [OUT]                # there: conform (all suites, or $SUITES; collectives
#                                                 # on every GPU, watchdog at 5 s) + overhead with its peers
#   DIR/device_check.sh graphs [OUT]              # there: overhead (twice), whole-step graph parity
#                                                 # (htr-train eager vs graphs), tests/cuda, conform graphs
#
# pack copies htr-info, htr-conform, test_plugins, test_cuda_kernels,
# htr-bench-gpu, htr-train and test_cuda_graph_policy (where built), the
# fortunes corpus as one file (where installed), tests/cuda/graph_parity.sh,
# libhtr, libhtr_cuda.so, the non-glibc libraries they link,
# and this machine's glibc with its loader (used only when the GPU machine's
# glibc is older than the one the binaries were linked against). DIR stays
# well under 64 MiB (debug info stripped). NVRTC, cuBLASLt and NCCL are not
# carried: run finds them on the GPU machine (CUDA toolkit, or the nvidia-*
# Python wheels next to PyTorch) and puts their folders on the library path.
set -euo pipefail
case "${1:-}" in
pack)
  B=$2 D=$3
  rm -rf "$D"
  mkdir -p "$D/bin" "$D/lib" "$D/glibc" "$D/plugins"
  bins="$B/tools/htr-conform/htr-conform $B/tools/htr-info/htr-info $B/tests/plugins/test_plugins
        $B/tests/cuda/test_cuda_kernels $B/tools/htr-bench/htr-bench-gpu"
  for extra in "$B/samples/htr-train/htr-train" "$B/tests/cuda/test_cuda_graph_policy" "$B/tools/htr-prof/htr-prof"; do
    [ -x "$extra" ] && bins="$bins $extra"
  done
  cp -L $bins "$D/bin/"
  cp -L "$B/runtime/libhtr.so.1" "$D/lib/"
  for f in $bins "$B/runtime/libhtr.so.1"; do
    ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      case "$name" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libhtr.so.*) ;;
        *) cp -Ln "$path" "$D/lib/" ;;
      esac
    done
  done
  for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
    cp -L "/lib/x86_64-linux-gnu/$l" "$D/glibc/"
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$D/glibc/"
  cp -L "$B/plugins/cuda/libhtr_cuda.so" "$D/plugins/"
  strip --strip-debug "$D"/bin/* "$D"/lib/* "$D/plugins/libhtr_cuda.so" 2>/dev/null || true
  cp "$0" "$D/device_check.sh"
  cp "$(dirname "$0")/overhead_peer.py" "$D/"
  cp "$(dirname "$0")/../../tests/cuda/graph_parity.sh" "$D/"
  if [ -d /usr/share/games/fortunes ]; then
    find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' -print0 | sort -z |
      xargs -0 cat > "$D/data.txt"
  fi
  du -sh "$D"
  ;;
run|bench|comm|graphs)
  set +o pipefail  # `ldd --version | head -1` and the like end their writers early
  D=$(cd "$(dirname "$0")" && pwd)
  OUT=${2:-${OUT:-/tmp/htr-cuda-check}}
  mkdir -p "$OUT"
  glibc=$(ldd --version | head -1 | grep -oE '[0-9]+\.[0-9]+$')
  echo "host glibc $glibc"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -9 || true
  nvidia-smi topo -m 2>&1 | head -6 || true
  # Folders holding NVRTC, cuBLASLt and NCCL on this machine.
  vendor=""
  for lib in libnvrtc.so.13 libnvrtc.so.12 libcublasLt.so.13 libcublasLt.so.12 libnccl.so.2; do
    p=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/lib/x86_64-linux-gnu /opt /usr/local/lib \
          -maxdepth 8 -name "$lib" 2>/dev/null | head -1 || true)
    [ -n "$p" ] && case ":$vendor:" in *":$(dirname "$p"):"*) ;; *) vendor="$vendor:$(dirname "$p")" ;; esac
  done
  vendor=${vendor#:}
  echo "vendor libraries from: $vendor"
  if [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" = "2.36" ]; then
    run() { LD_LIBRARY_PATH="$D/lib:$vendor" "$@"; }
  else
    echo "using the bundled glibc loader"
    run() { "$D/glibc/ld-linux-x86-64.so.2" --library-path "$D/lib:$D/glibc:$vendor" "$@"; }
  fi
  export HTR_PLUGIN_PATH="$D/plugins" HTR_TEST_CUDA_PLUGIN="$D/plugins/libhtr_cuda.so"
  export HTR_CACHE_DIR="$OUT/cache" NCCL_NVLS_ENABLE=0
  set +e
  rc=0
  if [ "$1" = run ]; then
    echo '$ htr-info'
    run "$D/bin/htr-info" 2>&1 | tee "$OUT/htr-info.txt"
    # --no-fork: CUDA cannot be used in a child forked after the driver was
    # initialized, so the kit's crash isolation (fork per case) cannot work.
    echo '$ htr-conform --plugin libhtr_cuda.so --no-fork'
    run "$D/bin/htr-conform" --plugin "$D/plugins/libhtr_cuda.so" --no-fork \
        --json "$OUT/conform-cuda.json" > "$OUT/conform-cuda.txt" 2>&1
    rc=$?
    grep -v " PASS " "$OUT/conform-cuda.txt"
    echo "conform rc=$rc"
    echo '$ test_cuda_kernels'
    run "$D/bin/test_cuda_kernels" 2>&1 | tail -25
    echo '$ test_cuda_kernels [lost]'
    run "$D/bin/test_cuda_kernels" "[lost]" 2>&1 | tail -25
    echo "exit status ${PIPESTATUS[0]}"
    echo '$ test_plugins [cuda]'
    run "$D/bin/test_plugins" "[cuda]" 2>&1 | tail -8
  fi
  if [ "$1" = graphs ]; then
    export D vendor
    for i in 1 2; do
      echo "\$ htr-bench-gpu overhead   # run $i"
      run "$D/bin/htr-bench-gpu" overhead 2>&1 | tee "$OUT/bench-overhead-$i.jsonl"
    done
    echo '$ graph_parity.sh (htr-train --device cuda:0 --preset tiny --steps 20, HTR_GRAPHS=0 vs 1)'
    if [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" = "2.36" ]; then
      T="env LD_LIBRARY_PATH=$D/lib:$vendor $D/bin/htr-train"
    else
      T="$D/glibc/ld-linux-x86-64.so.2 --library-path $D/lib:$D/glibc:$vendor $D/bin/htr-train"
    fi
    timeout 200 bash "$D/graph_parity.sh" "$T" "$OUT/parity" cuda:0 "${STEPS:-20}" --data "$D/data.txt"
    rc=$?
    echo "graph parity rc=$rc"
    echo '$ test_cuda_graph_policy'
    run "$D/bin/test_cuda_graph_policy" 2>&1 | tail -3
    echo '$ test_cuda_kernels'
    timeout 120 bash -c "$(declare -f run); run $D/bin/test_cuda_kernels" 2>&1 | tail -6
    echo '$ htr-conform --plugin libhtr_cuda.so --suite graphs'
    timeout 120 bash -c "$(declare -f run); run $D/bin/htr-conform --plugin $D/plugins/libhtr_cuda.so --suite graphs" 2>&1 | tail -8
    exit "$rc"
  fi
  if [ "$1" = comm ]; then
    echo '$ htr-info'
    run "$D/bin/htr-info" 2>&1 | tail -20
    echo '$ HTR_CUDA_NCCL_TIMEOUT_MS=5000 htr-conform --plugin libhtr_cuda.so --no-fork'
    HTR_CUDA_NCCL_TIMEOUT_MS=5000 HTR_CONFORM_COLLECTIVE_WAIT_S=60 \
      run "$D/bin/htr-conform" --plugin "$D/plugins/libhtr_cuda.so" --no-fork ${SUITES:+--suite "$SUITES"} \
      --json "$OUT/conform-cuda.json" > "$OUT/conform-cuda.txt" 2>&1 &
    pid=$!
    (sleep 200; kill -9 "$pid" 2>/dev/null) &
    killer=$!
    wait "$pid"
    rc=$?
    kill "$killer" 2>/dev/null
    grep -v " PASS " "$OUT/conform-cuda.txt" | tail -30
    grep -E "^(collectives|streams)" "$OUT/conform-cuda.txt"
    echo "conform rc=$rc"
    echo '$ htr-bench-gpu overhead'
    run "$D/bin/htr-bench-gpu" overhead 2>&1 | tee "$OUT/bench-overhead.jsonl"
    echo '$ python3 plugins/cuda/overhead_peer.py'
    [ -n "${NO_PEER:-}" ] || timeout 120 python3 "$D/overhead_peer.py" 2>&1 | tee -a "$OUT/bench-overhead.jsonl"
    exit "$rc"
  fi
  echo '$ htr-bench-gpu overhead'
  run "$D/bin/htr-bench-gpu" overhead 2>&1 | tee "$OUT/bench-overhead.jsonl"
  echo '$ htr-bench-gpu matmul-gpu --size 8192 --dtype bf16'
  run "$D/bin/htr-bench-gpu" matmul-gpu --size 8192 --dtype bf16 --python python3 2>&1 | tee "$OUT/bench-matmul.jsonl"
  exit "$rc"
  ;;
*)
  sed -n 2,17p "$0"
  exit 2
  ;;
esac
