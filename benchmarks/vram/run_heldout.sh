#!/usr/bin/env bash
# Held-out measurement on one CUDA GPU: writes each model shape to /dev/shm (in the background,
# one after another) and runs measure.py's held-out grid on it while the next one is written.
# Usage: bash benchmarks/vram/run_heldout.sh OUT_DIR BUDGET_S [PLAN [GRID]]  (from the repository root;
# needs bench-out/vram/llama-server.xz, python3 with numpy and nvidia-ml-py). PLAN is a list of
# shape:vocab:grid-rows items; the default is the first run's plan.
set -u
out=${1:?OUT_DIR}; budget=${2:-480}; grid=${4:-heldout}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
mkdir -p /tmp/vram/logs
xz -dc bench-out/vram/llama-server.xz > /tmp/vram/llama-server && chmod +x /tmp/vram/llama-server
for d in /usr/local/cuda-13.0/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
missing=$(ldd /tmp/vram/llama-server | grep "not found")
if [ -n "$missing" ]; then
  extra=$(find /usr/local /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
  [ -n "$extra" ] && export LD_LIBRARY_PATH="$(dirname "$extra"):$LD_LIBRARY_PATH"
fi
ldd /tmp/vram/llama-server | grep -E "cuda|cublas|not found"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv

# shape:vocab:grid rows (most important first; the deadline cuts the tail)
plan=${3:-"llama3.1-8b:128256:0,1,2,3,4,5,6,7,8,9,10,11 qwen2.5-7b:152064:0,1,2,3,4,5,6,7,8,9,10,11 gemma3-12b:262144:0,1,2,3,4,5,6,11 mistral-7b:32768:0,1,2,3,4,5"}
(for item in $plan; do
   s=${item%%:*}
   python3 benchmarks/vram/make_gguf.py --shape "$s" "/dev/shm/$s.gguf" && touch "/dev/shm/$s.ok"
 done) > "$out/make_gguf.log" 2>&1 &
for item in $plan; do
  IFS=: read -r s vocab rows <<< "$item"
  while [ ! -e "/dev/shm/$s.ok" ]; do
    sleep 1
    [ $(( $(date +%s) - t0 )) -gt "$budget" ] && break 2
  done
  left=$(( budget - ($(date +%s) - t0) - 25 ))
  [ "$left" -le 10 ] && break
  echo "== $s ($left s left)"
  mkdir -p "/tmp/vram/logs/$s"
  python3 benchmarks/vram/measure.py --server /tmp/vram/llama-server --model "/dev/shm/$s.gguf" \
    --out "$out/${grid}_$s.json" --grid "$grid" --shape "$s" --vocab "$vocab" --only "$rows" \
    --deadline-s "$left" --logdir "/tmp/vram/logs/$s"
  rm -f "/dev/shm/$s.gguf"
done
tar -czf "$out/server_logs.tgz" -C /tmp/vram logs 2>/dev/null
echo "elapsed $(( $(date +%s) - t0 )) s"
