#!/bin/bash
# integrated_check.sh — issue 8's H200 must-shows in one call, from a bundle made by
#   plugins/cuda/device_check.sh pack BUILD DIR    # (htr-train, data.txt, cuda plugin, tests, benches)
# plus the cpu plugin and its libraries (oneDNN and OpenBLAS xz-packed to stay under the 64 MiB
# carry limit):
#   cp -L BUILD/plugins/cpu/libhtr_cpu.so DIR/plugins/
#   ldd BUILD/plugins/cpu/libhtr_cpu.so  -> copy the non-glibc libraries into DIR/lib
#   (cd DIR/lib && tar cJf ../cpulibs.tar.xz libdnnl.so.2 libopenblas.so.0 && rm libdnnl.so.2 libopenblas.so.0)
#   cp plugins/cuda/integrated_check.sh DIR/
# There: bash DIR/integrated_check.sh OUT. It trains tiny 50 steps on cpu:0 and on cuda:0 (whole-step
# graphs and row kernels on; then HTR_GRAPHS=0; then HTR_CUDA_ROW_THREADS=0) and compares the loss
# curves step by step, runs the bf16 8192^3 matmul bench with PyTorch, the overhead bench, the
# conformance kit and the GPU kernel tests. Lead's run, session 4: plugins/cuda/README.md.
set +e +o pipefail
D=$(cd "$(dirname "$0")" && pwd)
tar xJf "$D/cpulibs.tar.xz" -C "$D/lib"
OUT=${1:-/tmp/lead}; mkdir -p "$OUT"
vendor=""
for lib in libnvrtc.so.13 libcublasLt.so.13 libnccl.so.2; do
  p=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -maxdepth 8 -name "$lib" 2>/dev/null | head -1)
  [ -n "$p" ] && vendor="$vendor:$(dirname "$p")"
done
PRE="env LD_LIBRARY_PATH=$D/lib:${vendor#:}"
export HTR_PLUGIN_PATH="$D/plugins" HTR_TEST_CUDA_PLUGIN="$D/plugins/libhtr_cuda.so" HTR_CACHE_DIR="$OUT/cache" NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
A="--preset tiny --steps 50 --seed 1337 --eval-every 0 --sample-tokens 0 --data-order sequential --progress plain --print-every 50 --data $D/data.txt"
cmp() { awk -F, -v l="$3" 'FNR==1{next} NR==FNR{c[$1]=$2;next} ($1 in c){d=$2-c[$1]; if(d<0)d=-d; m=c[$1]<0?-c[$1]:c[$1]; r=d/m; if(r>w){w=r;ws=$1} n++} END{printf "%s: %d steps, worst relative difference %.3g (step %s)\n", l, n, w, ws}' "$1" "$2"; }
timeout 120 $PRE $D/bin/htr-train --device cpu:0 $A --out-dir "$OUT/cpu" 2>&1 | grep "steps in"
HTR_LOG=info timeout 120 $PRE $D/bin/htr-train --device cuda:0 $A --out-dir "$OUT/cuda" > "$OUT/cuda.log" 2>&1; grep -E "steps in|step graph|captured" "$OUT/cuda.log" | head -3
HTR_GRAPHS=0 timeout 120 $PRE $D/bin/htr-train --device cuda:0 $A --out-dir "$OUT/eager" 2>&1 | grep "steps in"
HTR_CUDA_ROW_THREADS=0 timeout 120 $PRE $D/bin/htr-train --device cuda:0 $A --out-dir "$OUT/norow" 2>&1 | grep "steps in"
cmp "$OUT/cpu/loss.csv" "$OUT/cuda/loss.csv" "cuda (graphs, row kernels) vs cpu"
cmp "$OUT/eager/loss.csv" "$OUT/cuda/loss.csv" "cuda graphs vs eager"
cmp "$OUT/norow/loss.csv" "$OUT/cuda/loss.csv" "cuda row kernels vs per-thread"
cmp "$OUT/cpu/loss.csv" "$OUT/norow/loss.csv" "cuda per-thread vs cpu"
echo "== matmul-gpu"
timeout 100 $PRE $D/bin/htr-bench-gpu matmul-gpu --size 8192 --dtype bf16 --dsl-sizes 8192 --python python3 2>&1 | grep '"ratio"\|tflops' | sed 's/.*"impl":"\([^"]*\)".*"metric":"\([^"]*\)".*"value":\([0-9.]*\).*/\1 \2 \3/'
echo "== overhead"
timeout 60 $PRE $D/bin/htr-bench-gpu overhead 2>&1 | sed 's/.*"impl":"\([^"]*\)".*"metric":"\([^"]*\)".*"value":\([0-9.]*\).*/\1 \2 \3/' | tail -22
echo "== conform"
timeout 150 $PRE $D/bin/htr-conform --plugin "$D/plugins/libhtr_cuda.so" > "$OUT/conform.txt" 2>&1; echo "rc=$?"; tail -1 "$OUT/conform.txt"; grep " FAIL " "$OUT/conform.txt"
echo "== test_cuda_kernels [gpu]"
timeout 60 $PRE $D/bin/test_cuda_kernels "[gpu]" 2>&1 | tail -2
