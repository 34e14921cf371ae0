#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: write a Qwen3-14B-shaped Q4_K_M GGUF and record the app's
# telemetry while llama-server serves it. Usage: bash benchmarks/telemetry/run_on_gpu.sh OUT_DIR
# (from the repository root; needs bench-out/vram/llama-server.xz as built for benchmarks/vram).
set -eu
out=${1:?OUT_DIR}
export PYTHONUNBUFFERED=1
mkdir -p /tmp/telemetry
xz -dc bench-out/vram/llama-server.xz > /tmp/telemetry/llama-server && chmod +x /tmp/telemetry/llama-server
for d in /usr/local/cuda-13.0/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
if ldd /tmp/telemetry/llama-server | grep -q "not found"; then
  extra=$(find /usr/local /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
  [ -n "$extra" ] && export LD_LIBRARY_PATH="$(dirname "$extra"):$LD_LIBRARY_PATH"
fi
python3 benchmarks/vram/make_gguf.py /dev/shm/qwen3-14b.gguf
python3 benchmarks/telemetry/record.py --server /tmp/telemetry/llama-server --model /dev/shm/qwen3-14b.gguf \
  --out "$out/recording.json" "${@:2}"
