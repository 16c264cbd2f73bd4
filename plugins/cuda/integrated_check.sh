#!/bin/bash
# integrated_check.sh — the lead's one-call H200 check of the integrated tree (issues 7, 8, 9).
#
#   plugins/cuda/integrated_check.sh pack BUILD DIR   # here: bundle (< 64 MiB) into an ignored DIR
#   bash DIR/integrated_check.sh run OUT              # there (carry DIR and .gl)
#
# pack: plugins/cuda/device_check.sh pack (htr-train, benches, tests, cuda plugin, corpus) plus the
# cpu plugin (oneDNN and OpenBLAS xz-packed to stay under the carry limit), the vulkan plugin,
# test_cuda_attention, test_cuda_rows and tools/compare_loss_curve.py.
# run: sections from $SECTIONS (default: all, in this order; each bounded by `timeout`):
#   parity     tiny 50 steps cpu:0 vs cuda:0 (whole-step graphs and row kernels on; then HTR_GRAPHS=0),
#              worst per-step relative loss difference
#   gpu        test_cuda_kernels [gpu], test_cuda_attention [gpu] (twice: defaults, then 128 KiB
#              attention head groups), test_cuda_rows [gpu]
#   conform    htr-conform on the cuda plugin
#   attention  htr-bench-gpu attention-gpu ($ATTN_SHAPES: B8 H12 T1024 D64 and T4096 D128, bf16,
#              causal; $ATTN_TILES: 64x64) with PyTorch SDPA in the same run, once per setting in
#              $ATTN_ENVS (as ROWS_ENVS) and layout in $ATTN_LAYOUTS (bhtd; gpt2: htr-train's views
#              into the qkv projection), one attention-SETTING-SHAPE-LAYOUT.jsonl each, dQ / dK-dV printed
#   rows       htr-bench-gpu rows-gpu: gpt2's elementwise/row kernels (GB/s) with PyTorch eager, once
#              per setting in $ROWS_ENVS (default: the tree's; a setting is VAR=V[,VAR=V...]; the
#              peer runs with the first)
#   matmul     htr-bench-gpu matmul-gpu bf16 8192^3 (cuBLASLt and the DSL) with PyTorch
#   vulkan     the Vulkan loader from .gl; matmul-gpu on vulkan:0 (f16 and bf16 on cooperative matrices, f32;
#              4096 and 8192) with PyTorch, htr-conform on the vulkan plugin
#   vkattention htr-bench-gpu attention-gpu on vulkan:0 (gpt2's B16 H12 T1024 D64, layout gpt2) for each
#              of $VKATT_TILES, PyTorch SDPA on cuda:0 in the same run (the Vulkan loader as in vulkan)
#   train      htr-bench-gpu train --preset gpt2 (B16 T1024, bf16) on $TRAIN_DEVICES with PyTorch
#              (torch.compile, bf16 autocast) on the same GPU
#   peerprof   the PyTorch peer of `train` (torch.compile, bf16) for 3 warm-up steps and one step
#              under torch.profiler: its top $PEERPROF_ROWS (45) kernels by self device time
#   curve      tools/compare_loss_curve.py on $CURVE_DEVICE (cuda:0; cpu:0 runs both sides on the
#              host's cores) with $CURVE_ARGS (its work files in /tmp/htr-curve, curve.json in OUT)
#   profile    htr-train --preset gpt2 bf16 B16 T1024 on $PROFILE_DEVICE (cuda:0), $PROFILE_STEPS (4) steps with --profile; the
#              trace is gzipped into OUT and its last step summarised by htr-prof (--step last)
#   profiles   the profile section's run ($PROFILE_STEPS, default 3 here) once per setting in
#              $PROFILE_ENVS (as ROWS_ENVS), printing htr-prof's last-step lines that match
#              $PROFILE_GREP (default: layer_norm_grad, cast+sum, op time) and the last step's tokens/s
#   ablate     htr-train --preset gpt2 bf16 B16 T1024, $ABLATE_STEPS (8) steps once per setting in
#              $ABLATE_ENVS (default: the tree's defaults, HTR_MATMUL_F32_OUT=0,
#              HTR_SHARE_WEIGHT_CASTS=1; as ROWS_ENVS): the plan line, the last step's tokens/s and
#              the median of steps 4..$ABLATE_STEPS
# Lead's runs: plugins/cuda/README.md and plugins/vulkan/README.md.
set +e +o pipefail
case "${1:-}" in
pack)
  B=$2 D=$3
  S=$(cd "$(dirname "$0")/../.." && pwd)
  bash "$S/plugins/cuda/device_check.sh" pack "$B" "$D" >/dev/null || exit 1
  cp -L "$B/plugins/cpu/libhtr_cpu.so" "$B/plugins/vulkan/libhtr_vulkan.so" "$D/plugins/"
  for t in test_cuda_attention test_cuda_rows; do
    [ -x "$B/tests/cuda/$t" ] && cp -L "$B/tests/cuda/$t" "$D/bin/"
  done
  for f in "$D/plugins/libhtr_cpu.so" "$D/plugins/libhtr_vulkan.so" "$D/bin/test_cuda_attention" "$D/bin/test_cuda_rows"; do
    [ -f "$f" ] || continue
    ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      case "$name" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libhtr.so.*) ;;
        *) cp -Ln "$path" "$D/lib/" ;;
      esac
    done
  done
  strip --strip-debug "$D"/plugins/* "$D"/bin/* "$D"/lib/* 2>/dev/null
  (cd "$D/lib" && tar cJf ../cpulibs.tar.xz libdnnl.so.* libopenblas.so.* && rm -f libdnnl.so.* libopenblas.so.*)
  rm -rf "$D/glibc"
  cp "$S/tools/compare_loss_curve.py" "$S/tools/lsan_tracer_flake.py" "$0" "$D/"
  du -sh "$D"
  exit 0
  ;;
run) ;;
*) echo "usage: $0 pack BUILD DIR | run OUT" >&2; exit 2 ;;
esac
D=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-/tmp/lead}; mkdir -p "$OUT"
tar xJf "$D/cpulibs.tar.xz" -C "$D/lib"
vendor=""
for lib in libnvrtc.so.13 libcublasLt.so.13 libnccl.so.2; do
  p=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -maxdepth 8 -name "$lib" 2>/dev/null | head -1)
  [ -n "$p" ] && vendor="$vendor:$(dirname "$p")"
done
export LD_LIBRARY_PATH="$D/lib$vendor" HTR_PLUGIN_PATH="$D/plugins" HTR_TEST_CUDA_PLUGIN="$D/plugins/libhtr_cuda.so"
export HTR_CACHE_DIR="${HTR_CACHE_DIR:-/tmp/htr-cache}" NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
PY=$(command -v python3)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - T0 )) s)"; }
short() { sed 's/.*"impl":"\([^"]*\)".*"metric":"\([^"]*\)".*"value":\([0-9.e+-]*\).*/\1 \2 \3/'; }
cmp() { awk -F, -v l="$3" 'FNR==1{next} NR==FNR{c[$1]=$2;next} ($1 in c){d=$2-c[$1]; if(d<0)d=-d; m=c[$1]<0?-c[$1]:c[$1]; r=d/m; if(r>w){w=r;ws=$1} n++} END{printf "%s: %d steps, worst relative difference %.3g (step %s)\n", l, n, w, ws}' "$1" "$2"; }
for sec in ${SECTIONS:-parity gpu conform attention matmul vulkan train curve}; do
  stamp "$sec"
  case $sec in
  parity)
    A="--preset tiny --steps 50 --seed 1337 --eval-every 0 --sample-tokens 0 --data-order sequential --progress plain --print-every 50 --data $D/data.txt"
    timeout 120 "$D/bin/htr-train" --device cpu:0 $A --out-dir "$OUT/cpu" 2>&1 | grep "steps in"
    HTR_LOG=info timeout 120 "$D/bin/htr-train" --device cuda:0 $A --out-dir "$OUT/cuda" > "$OUT/cuda.log" 2>&1
    grep -E "plan:|steps in|step graph|captured" "$OUT/cuda.log" | head -4
    HTR_GRAPHS=0 timeout 120 "$D/bin/htr-train" --device cuda:0 $A --out-dir "$OUT/eager" 2>&1 | grep "steps in"
    cmp "$OUT/cpu/loss.csv" "$OUT/cuda/loss.csv" "cuda (graphs, row kernels) vs cpu"
    cmp "$OUT/eager/loss.csv" "$OUT/cuda/loss.csv" "cuda graphs vs eager"
    ;;
  gpu)
    timeout 90 "$D/bin/test_cuda_kernels" "[gpu]" > "$OUT/gpu-kernels.txt" 2>&1; tail -2 "$OUT/gpu-kernels.txt"
    grep -B4 -A10 "FAILED" "$OUT/gpu-kernels.txt" | head -60
    [ -x "$D/bin/test_cuda_attention" ] && timeout 90 "$D/bin/test_cuda_attention" "[gpu]" 2>&1 | tail -2
    # again with head groups of 2 and 1 for its B3 H1 T130 shape (CudaTarget::attn_group_bytes_q / _k)
    [ -x "$D/bin/test_cuda_attention" ] && HTR_CUDA_ATTN_GROUP_Q_KB=128 HTR_CUDA_ATTN_GROUP_K_KB=128 timeout 90 "$D/bin/test_cuda_attention" "[gpu]" 2>&1 | tail -2
    [ -x "$D/bin/test_cuda_rows" ] && timeout 90 "$D/bin/test_cuda_rows" "[gpu]" 2>&1 | tail -2
    ;;
  conform)
    timeout 150 "$D/bin/htr-conform" --plugin "$D/plugins/libhtr_cuda.so" > "$OUT/conform-cuda.txt" 2>&1
    echo "rc=$?"; tail -1 "$OUT/conform-cuda.txt"; grep " FAIL " "$OUT/conform-cuda.txt"
    ;;
  attention)
    for e in ${ATTN_ENVS:-default}; do
      ev=""; [ "$e" != default ] && ev=${e//,/ }
      for s in ${ATTN_SHAPES:-8,12,1024,64 8,12,4096,128}; do
        for l in ${ATTN_LAYOUTS:-bhtd}; do
          f="$OUT/attention-${e//[=,]/_}-$s-$l"
          env $ev timeout 90 "$D/bin/htr-bench-gpu" attention-gpu --device cuda:0 --shapes $s --tiles ${ATTN_TILES:-64x64} \
            --layout $l --python "$PY" > "$f.jsonl" 2> "$f.err"; echo "attention $e $s $l rc=$?"
          grep -E '"ratio"|_ms"|speedup|bytes' "$f.jsonl" | short; tail -2 "$f.err"
          grep '"htr-sweep".*"dkdv_ms"' "$f.jsonl" | sed 's/.*"dkdv_ms":\([0-9.]*\),"dq_ms":\([0-9.]*\).*/  dq \2 dkdv \1/'
        done
      done
    done
    ;;
  rows)
    peer="--python $PY"
    for e in ${ROWS_ENVS:-default}; do
      ev=""; [ "$e" != default ] && ev=${e//,/ }
      env $ev timeout ${ROWS_TIMEOUT:-90} "$D/bin/htr-bench-gpu" rows-gpu --device cuda:0 $peer > "$OUT/rows-${e//[=,]/_}.jsonl" 2> "$OUT/rows.err"
      echo "rows $e rc=$?"; grep '"GB_per_s"' "$OUT/rows-${e//[=,]/_}.jsonl" | sed 's/.*"impl":"\([^"]*\)".*"shape":"\([^"]*\)".*"value":\([0-9.]*\).*/\1 \2 \3/'
      tail -2 "$OUT/rows.err"; peer=--no-peer
    done
    ;;
  matmul)
    timeout 100 "$D/bin/htr-bench-gpu" matmul-gpu --size 8192 --dtype bf16 --dsl-sizes 8192 --python "$PY" 2>&1 |
      grep '"ratio"\|tflops' | short
    ;;
  vulkan)
    for f in "$D"/../.gl/*.deb .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done; ldconfig
    [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
      export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    # the library matmul at 4096 and 8192 against PyTorch in the same process (f16 and bf16 on
    # cooperative matrices, plugins/vulkan/README.md)
    for dt in ${VK_DTYPES:-f16 bf16 f32}; do
      for n in ${VK_SIZES:-4096 8192}; do
        timeout 120 "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 --dtype $dt --size $n \
          --dsl-sizes 0 --reps 10 --python "$PY" 2>&1 | grep '"ratio"\|tflops' | short
      done
    done
    # bf16 on cooperative matrices (HTR_VK_COOPMM_BF16=1, the default) against the DSL kernel (=0) at
    # 4096, plain and transposed: NMSE of the second against the first
    for tr in "" "--trans-a 1 --trans-b 1"; do
      timeout 30 "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 --dtype bf16 --size 4096 --dsl-sizes 0 --reps 2 \
        --warmup 1 --warmup-ms 0 --python false $tr --sweep-env HTR_VK_COOPMM_BF16 --sweep-values "1;0" 2>&1 |
        grep -o '"env":"[^"]*"\|"nmse_vs_first":[^,]*\|"value":[0-9.e+-]*' | tr '\n' ' '
      echo " [bf16 fast vs DSL $tr]"
    done
    timeout 200 "$D/bin/htr-conform" --plugin "$D/plugins/libhtr_vulkan.so" > "$OUT/conform-vulkan.txt" 2>&1
    echo "conform vulkan rc=$?"; tail -1 "$OUT/conform-vulkan.txt"; grep " FAIL " "$OUT/conform-vulkan.txt"
    ;;
  vkattention)
    # the fused attention kernels on vulkan:0 (gpt2's shape and layout) per tile, against SDPA on cuda:0
    for f in "$D"/../.gl/*.deb .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done; ldconfig
    [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
      export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    timeout ${VKATT_TIMEOUT:-300} "$D/bin/htr-bench-gpu" attention-gpu --device vulkan:0 --shapes ${VKATT_SHAPES:-16,12,1024,64} \
      --layout gpt2 --tiles ${VKATT_TILES:-32x32,64x32,32x64,16x64,64x16,16x32,32x16,16x16} --reps 3 --warmup 1 \
      --python "$PY" > "$OUT/vkattention.jsonl" 2> "$OUT/vkattention.err"
    echo "vkattention rc=$?"; grep -E '"ratio"|_ms"|tiles' "$OUT/vkattention.jsonl" | cut -c1-300; tail -5 "$OUT/vkattention.err"
    ;;
  train)
    timeout ${TRAIN_TIMEOUT:-240} "$D/bin/htr-bench-gpu" train --preset gpt2 --batch 16 --seq 1024 --precision bf16 \
      --device ${TRAIN_DEVICES:-cuda:0} --warmup 2 --steps 3 --timeout-s ${TRAIN_HTR_TIMEOUT:-150} --python "$PY" \
      > "$OUT/train-gpt2.jsonl" 2> "$OUT/train-gpt2.err"
    echo "train rc=$?"; cat "$OUT/train-gpt2.jsonl"; tail -5 "$OUT/train-gpt2.err"
    ;;
  peerprof)
    "$D/bin/htr-bench-gpu" train --print-peer-script > "$OUT/peer_train.py"
    timeout ${PEERPROF_TIMEOUT:-200} "$PY" "$OUT/peer_train.py" --preset gpt2 --batch 16 --seq 1024 --device cuda:0 \
      --precision bf16 --mode compile --warmup 3 --steps 1 --profile ${PEERPROF_ROWS:-45} > "$OUT/peerprof.jsonl" 2> "$OUT/peerprof.txt"
    echo "peerprof rc=$?"; tail -2 "$OUT/peerprof.jsonl" | cut -c1-200; grep -v "^W\|^I\|Warning" "$OUT/peerprof.txt" | tail -${PEERPROF_ROWS:-45}
    ;;
  curve)
    cdev=${CURVE_DEVICE:-cuda:0}
    timeout ${CURVE_TIMEOUT:-120} "$PY" "$D/compare_loss_curve.py" --htr-train "$D/bin/htr-train" --device "$cdev" \
      --torch-device "${cdev%%:*}" --data "$D/data.txt" --workdir /tmp/htr-curve --json "$OUT/curve.json" \
      ${CURVE_ARGS:---preset tiny --steps 200 --warmup 10} 2>&1 | tail -8
    ;;
  ablate)
    for e in ${ABLATE_ENVS:-default HTR_MATMUL_F32_OUT=0 HTR_SHARE_WEIGHT_CASTS=1}; do
      n=${ABLATE_STEPS:-8}
      ev=""; [ "$e" != default ] && ev=${e//,/ }
      env $ev timeout ${ABLATE_TIMEOUT:-150} "$D/bin/htr-train" --device cuda:0 --preset gpt2 --batch 16 --seq 1024 \
        --precision bf16 --steps "$n" --eval-every 0 --sample-tokens 0 --progress plain --print-every 1 \
        --print-plan --data "$D/data.txt" --out-dir "$OUT/ablate" > "$OUT/ablate-${e//[=,]/_}.log" 2>&1
      echo "ablate $e rc=$?: $(grep -m1 -E 'plan:' "$OUT/ablate-${e//[=,]/_}.log" | cut -c1-120)"
      echo "ablate $e: $(grep -E "^step $n/$n" "$OUT/ablate-${e//[=,]/_}.log" | tail -1)"
      # the median tokens/s of steps 4..n (single steps move by several % on a GPU)
      echo "ablate $e: median tokens/s of steps 4-$n: $(grep -E "^step [0-9]+/$n " "$OUT/ablate-${e//[=,]/_}.log" |
        awk '{split($2, s, "/"); if (s[1] >= 4) print $7}' | sort -n | awk '{v[NR]=$1} END{if (NR) print v[int((NR+1)/2)]}')"
    done
    ;;
  profiles)
    for e in ${PROFILE_ENVS:-default}; do
      ev=""; [ "$e" != default ] && ev=${e//,/ }
      env $ev timeout ${PROFILE_TIMEOUT:-200} "$D/bin/htr-train" --device cuda:0 --preset gpt2 --batch 16 --seq 1024 \
        --precision bf16 --steps ${PROFILE_STEPS:-3} --eval-every 0 --sample-tokens 0 --progress plain --print-every 1 \
        --data "$D/data.txt" --out-dir "$OUT/gpt2" --profile "$OUT/trace.json" > "$OUT/profiles.log" 2>&1
      echo "profiles $e rc=$?: $(grep -E '^step' "$OUT/profiles.log" | tail -1 | cut -c1-60)"
      "$D/bin/htr-prof" "$OUT/trace.json" --top 40 --step last | grep -E "${PROFILE_GREP:-layer_norm_grad|cast\+sum|op time}"
    done
    rm -f "$OUT/trace.json"
    ;;
  profile)
    timeout ${PROFILE_TIMEOUT:-200} "$D/bin/htr-train" --device ${PROFILE_DEVICE:-cuda:0} --preset gpt2 --batch 16 \
      --seq 1024 --precision bf16 --steps ${PROFILE_STEPS:-4} --eval-every 0 --sample-tokens 0 --progress plain --print-every 1 --data "$D/data.txt" \
      --out-dir "$OUT/gpt2" --profile "$OUT/gpt2-trace.json" > "$OUT/gpt2-profile.log" 2>&1
    echo "profile rc=$?"; grep -E "^step|steps in" "$OUT/gpt2-profile.log" | tail -4
    [ -f "$OUT/gpt2-trace.json" ] && "$D/bin/htr-prof" "$OUT/gpt2-trace.json" --top 40 --step last && gzip -f "$OUT/gpt2-trace.json"
    ;;
  esac
done
stamp done
