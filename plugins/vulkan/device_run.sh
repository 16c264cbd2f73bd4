#!/bin/bash
# device_run.sh — the vulkan plugin's H200 measurements in one device call (plugins/vulkan/README.md).
#
#   plugins/vulkan/device_run.sh pack BUILD DIR   # here: htr-bench-gpu, htr-conform, htr-info, libhtr,
#                                                 # libhtr_vulkan.so and their non-glibc libraries into DIR
#   bash DIR/device_run.sh run [OUT]              # there (repository root, .gl carried): the Vulkan loader
#                                                 # from .gl, then the sections below
#
# Sections (SECTIONS, default "f16 bf16 bf16check conform"):
#   f16      f16 fast-path sweep (HTR_VK_COOPMM values in VK_SWEEP, ';'-separated) at 4096 and 8192
#            with pipeline statistics, PyTorch (cuBLAS) on the same GPU in the same process
#   conform  htr-conform --plugin libhtr_vulkan.so --no-fork
#   bf16     bf16 on KHR cooperative matrices (HTR_VK_COOPMM_BF16=1): sweep of VK_SWEEP_BF16 at 4096
#            and 8192 with PyTorch at both sizes
#   bf16check the bf16 fast path against the DSL library kernel at 4096 (NMSE), plain and transposed
#   wg       f16 on workgroup-scope matrices (VK_NV_cooperative_matrix2): the device's flexible
#            shapes (htr-info at HTR_LOG=info), then a sweep of HTR_VK_COOPMM2 values in VK_SWEEP_WG
#            (';'-separated; the first, 0, is the subgroup kernel and the NMSE reference) at 4096
#            and 8192 with PyTorch, then VK_WG_CHECK (default: the sweep's second value) with
#            transposed operands against the subgroup kernel at 4096
#   transcheck  the subgroup kernel with A and B transposed (--trans-a 1 --trans-b 1) at 4096, f16 and
#            bf16: the HTR_VK_COOPMM values of VK_TRANS_CHECK, each against the first (NMSE)
#   tensor   f16 and bf16 on workgroup-scope matrices loaded through tensor layouts (HTR_VK_COOPMM_TENSOR
#            values in VK_SWEEP_TENSOR), each against the subgroup kernel and PyTorch, the driver's
#            internal representations in ir.tgz, and a transposed check (VK_TENSOR_CHECK)
set +e +o pipefail
case "${1:-}" in
pack)
  B=$2 D=$3
  rm -rf "$D"
  mkdir -p "$D/bin" "$D/lib" "$D/plugins"
  bins="$B/tools/htr-bench/htr-bench-gpu $B/tools/htr-conform/htr-conform $B/tools/htr-info/htr-info"
  cp -L $bins "$D/bin/" || exit 1
  cp -L "$B/runtime/libhtr.so.1" "$D/lib/" || exit 1
  cp -L "$B/plugins/vulkan/libhtr_vulkan.so" "$D/plugins/" || exit 1
  for f in $bins "$B/runtime/libhtr.so.1" "$B/plugins/vulkan/libhtr_vulkan.so"; do
    ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      case "$name" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libhtr.so.*|libvulkan.so.*) ;;
        *) cp -Ln "$path" "$D/lib/" ;;
      esac
    done
  done
  strip --strip-debug "$D"/bin/* "$D"/lib/* "$D"/plugins/* 2>/dev/null
  cp "$0" "$D/device_run.sh"
  du -sh "$D"
  exit 0
  ;;
run) ;;
*) echo "usage: $0 pack BUILD DIR | run [OUT]" >&2; exit 2 ;;
esac
D=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-${OUT:-/tmp/vk}}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH="$D/lib" HTR_PLUGIN_PATH="$D/plugins" HTR_CACHE_DIR="$OUT/cache" PYTHONUNBUFFERED=1
PY=$(command -v python3)
T0=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - T0 )) s)"; }
short() { sed 's/.*"env":"\([^"]*\)".*"impl":"\([^"]*\)".*"metric":"\([^"]*\)".*"shape":"\([^"]*\)".*"value":\([0-9.e+-]*\).*/\1 \2 \3 \4 \5/; s/.*"impl":"\([^"]*\)".*"metric":"\([^"]*\)".*"shape":"\([^"]*\)".*"value":\([0-9.e+-]*\).*/\1 \2 \3 \4/'; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
"$D/bin/htr-info" 2>&1 | grep -i "vulkan" | head -4
HTR_LOG=info "$D/bin/htr-info" 2>&1 | grep -i "workgroup memory" | head -2
# default sweeps: the defaults first (the NMSE reference), each candidate
# on NV cooperative matrices and through the KHR rewrite (`khr`; bf16 is always KHR)
VK_SWEEP=${VK_SWEEP:-128x256x32x512x1x1;128x256x32x512x1x1,khr;128x128x32x128x2x1,lean;128x128x32x128x2x1,lean,khr;128x256x32x256x1x1,lean;128x256x32x256x1x1,lean,khr;128x128x32x256x2x3;128x128x32x256x2x3,khr;256x128x32x512x1x1,khr;128x128x32x128x2x2,lean,khr}
VK_SWEEP_BF16=${VK_SWEEP_BF16:-128x128x32x128x2x1,lean;128x128x32x128x2x1;128x256x32x512x1x1;128x256x32x256x1x1,lean;128x128x32x128x2x2,lean;128x128x32x256x2x1;256x128x32x256x1x1,lean;128x128x64x128x1x1,lean}
for sec in ${SECTIONS:-f16 bf16 bf16check conform}; do
  stamp "$sec"
  case $sec in
  f16)
    HTR_VK_PIPELINE_STATS=1 HTR_LOG=info timeout ${F16_TIMEOUT:-55} "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 \
      --dtype f16 --size 4096 --dsl-sizes 0 --reps 10 --warmup 2 --warmup-ms 300 --python "$PY" \
      --sweep-env HTR_VK_COOPMM --sweep-sizes 4096,8192 --sweep-nmse-max 4096 --sweep-values "$VK_SWEEP" > "$OUT/f16.jsonl" 2> "$OUT/f16.err"
    echo "f16 rc=$?"
    short < "$OUT/f16.jsonl"
    grep -i "pipeline stats\|differs\|fail\|error" "$OUT/f16.err" | cut -c1-400 | head -40
    ;;
  conform)
    timeout ${CONFORM_TIMEOUT:-20} "$D/bin/htr-conform" --plugin "$D/plugins/libhtr_vulkan.so" --no-fork \
      > "$OUT/conform.txt" 2>&1
    echo "conform rc=$?"; tail -1 "$OUT/conform.txt"; grep " FAIL " "$OUT/conform.txt" | head
    ;;
  bf16)
    HTR_VK_COOPMM_BF16=1 HTR_VK_PIPELINE_STATS=1 HTR_LOG=info timeout ${BF16_TIMEOUT:-42} "$D/bin/htr-bench-gpu" \
      matmul-gpu --device vulkan:0 --dtype bf16 --size 8192 --dsl-sizes 0 --reps 10 --warmup 2 --warmup-ms 300 \
      --python "$PY" --sweep-env HTR_VK_COOPMM --sweep-sizes 4096,8192 --sweep-nmse-max 4096 --sweep-values "$VK_SWEEP_BF16" \
      > "$OUT/bf16.jsonl" 2> "$OUT/bf16.err"
    echo "bf16 rc=$?"
    short < "$OUT/bf16.jsonl"
    grep -i "pipeline stats\|differs\|fail\|error\|rewrite" "$OUT/bf16.err" | cut -c1-400 | head -20
    ;;
  wg)
    HTR_LOG=info "$D/bin/htr-info" 2>&1 | grep -i "flexible\|vulkan" | head -40
    VK_SWEEP_WG=${VK_SWEEP_WG:-0;128x128x32x128;128x128x32x256;128x256x32x256;256x128x32x256;128x128x64x256;128x256x64x256;256x256x32x256;256x256x32x512;128x256x32x256x2;256x128x32x256x2;128x128x32x128x2}
    HTR_VK_PIPELINE_STATS=1 HTR_LOG=info timeout ${WG_TIMEOUT:-90} "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 \
      --dtype f16 --size 4096 --dsl-sizes 0 --reps 10 --warmup 2 --warmup-ms 300 --python "$PY" \
      --sweep-env HTR_VK_COOPMM2 --sweep-sizes 4096,8192 --sweep-nmse-max 4096 --sweep-values "$VK_SWEEP_WG" > "$OUT/wg.jsonl" 2> "$OUT/wg.err"
    echo "wg rc=$?"
    short < "$OUT/wg.jsonl"
    grep -i "pipeline stats\|differs\|fail\|error\|coopmm_wg\|rewrite" "$OUT/wg.err" | cut -c1-400 | head -40
    chk=${VK_WG_CHECK:-$(echo "$VK_SWEEP_WG" | cut -d';' -f2)}
    timeout ${CHECK_TIMEOUT:-20} "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 --dtype f16 --size 4096 \
      --dsl-sizes 0 --reps 2 --warmup 1 --warmup-ms 0 --python false --trans-a 1 --trans-b 1 --sweep-env HTR_VK_COOPMM2 \
      --sweep-values "0;$chk" > "$OUT/wgcheck.jsonl" 2> "$OUT/wgcheck.err"
    echo "wgcheck [A^T B^T, $chk] rc=$?"
    grep -o '"env":"[^"]*"\|"nmse_vs_first":[^,]*\|"value":[0-9.e+-]*' "$OUT/wgcheck.jsonl" | tr '\n' ' '; echo
    grep -i "differs\|error" "$OUT/wgcheck.err" | head -3
    ;;
  tensor)
    # workgroup-scope matrices through tensor layouts (HTR_VK_COOPMM_TENSOR, vk_spirv_tensor_mm.h): f16 and
    # bf16 sweeps (the first value, 0, is the subgroup kernel and the NMSE reference) at 4096 and 8192 with
    # PyTorch, the driver's internal representations of every pipeline (ir.tgz, where it offers any), then
    # VK_TENSOR_CHECK (default: the sweep's second value) with transposed operands at 4096
    VK_SWEEP_TENSOR=${VK_SWEEP_TENSOR:-0;128x128x32x128;128x128x32x256;128x128x64x256;128x256x32x256;128x256x64x256;256x128x32x256;256x128x64x256;256x256x32x256;128x256x32x256x2;256x128x32x256x2}
    for dt in f16 bf16; do
      HTR_VK_COOPMM_BF16=1 HTR_VK_PIPELINE_STATS=1 HTR_VK_PIPELINE_IR="$OUT/ir" HTR_LOG=info timeout ${TENSOR_TIMEOUT:-100} \
        "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 --dtype $dt --size 4096 --dsl-sizes 0 --reps 10 --warmup 2 \
        --warmup-ms 300 --python "$PY" --sweep-env HTR_VK_COOPMM_TENSOR --sweep-sizes 4096,8192 --sweep-nmse-max 4096 \
        --sweep-values "$VK_SWEEP_TENSOR" > "$OUT/tensor_$dt.jsonl" 2> "$OUT/tensor_$dt.err"
      echo "tensor $dt rc=$?"
      short < "$OUT/tensor_$dt.jsonl"
      grep -i "pipeline stats\|internal repr\|differs\|fail\|error" "$OUT/tensor_$dt.err" | cut -c1-300 | head -30
      chk=${VK_TENSOR_CHECK:-$(echo "$VK_SWEEP_TENSOR" | cut -d';' -f2)}
      HTR_VK_COOPMM_BF16=1 timeout ${CHECK_TIMEOUT:-20} "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 --dtype $dt \
        --size 4096 --dsl-sizes 0 --reps 2 --warmup 1 --warmup-ms 0 --python false --trans-a 1 --trans-b 1 \
        --sweep-env HTR_VK_COOPMM_TENSOR --sweep-values "0;$chk" > "$OUT/tensorcheck.jsonl" 2> "$OUT/tensorcheck.err"
      echo "tensorcheck $dt [A^T B^T, $chk] rc=$?"
      grep -o '"env":"[^"]*"\|"nmse_vs_first":[^,]*\|"value":[0-9.e+-]*' "$OUT/tensorcheck.jsonl" | tr '\n' ' '; echo
      grep -i "differs\|error" "$OUT/tensorcheck.err" | head -3
    done
    [ -d "$OUT/ir" ] && { ls "$OUT/ir" | head -5; tar czf "$OUT/ir.tgz" -C "$OUT" ir && rm -rf "$OUT/ir"; }
    ;;
  transcheck)
    for dt in f16 bf16; do
      HTR_VK_COOPMM_BF16=1 timeout ${CHECK_TIMEOUT:-20} "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 --dtype $dt \
        --size 4096 --dsl-sizes 0 --reps 2 --warmup 1 --warmup-ms 0 --python false --trans-a 1 --trans-b 1 \
        --sweep-env HTR_VK_COOPMM --sweep-values "${VK_TRANS_CHECK:-128x128x32x128x2x1,lean;128x128x32x128x2x1,lean,bank,peel}" \
        > "$OUT/transcheck_$dt.jsonl" 2> "$OUT/transcheck_$dt.err"
      echo "transcheck $dt rc=$?"
      grep -o '"env":"[^"]*"\|"nmse_vs_first":[^,]*\|"value":[0-9.e+-]*' "$OUT/transcheck_$dt.jsonl" | tr '\n' ' '; echo
      grep -i "differs\|error" "$OUT/transcheck_$dt.err" | head -3
    done
    ;;
  bf16check)
    # the bf16 fast path (first value) against the DSL library kernel (second), plain and transposed
    for tr in "" "--trans-a 1 --trans-b 1"; do
      timeout ${CHECK_TIMEOUT:-15} "$D/bin/htr-bench-gpu" matmul-gpu --device vulkan:0 --dtype bf16 --size 4096 \
        --dsl-sizes 0 --reps 2 --warmup 1 --warmup-ms 0 --python false $tr --sweep-env HTR_VK_COOPMM_BF16 \
        --sweep-values "1;0" > "$OUT/bf16check.jsonl" 2> "$OUT/bf16check.err"
      echo "bf16check [$tr] rc=$?"
      grep -o '"env":"[^"]*"\|"nmse_vs_first":[^,]*\|"value":[0-9.e+-]*' "$OUT/bf16check.jsonl" | tr '\n' ' '; echo
      grep -i "differs\|error" "$OUT/bf16check.err" | head -3
    done
    ;;
  esac
done
stamp done
