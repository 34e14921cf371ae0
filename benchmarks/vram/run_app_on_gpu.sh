#!/usr/bin/env bash
# The app's own commands on one CUDA GPU simulated as a 24 GiB card, against the real Ollama 0.32.15: a managed
# sweep (which teaches the runtime figure and records the server's own peak beside the card's), then `estimate`
# with the figure it learnt. Builds llama.cpp's CUDA llama-server as run_ollama_fit.sh does.
# Usage: bash benchmarks/vram/run_app_on_gpu.sh OUT   (repository root; .devcarry/ as for run_ollama_fit.sh, plus
# whl/ with the platformdirs and gguf wheels)
set -u
out=${1:?OUT}; W=/tmp/vram; mkdir -p $W/logs
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .devcarry/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d $d ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}; done
(python3 benchmarks/vram/make_gguf.py --shape qwen3-14b /dev/shm/q.gguf > $W/gguf.log 2>&1; touch /dev/shm/q.ok) &
mkdir -p $W/src && tar xJf .devcarry/lcpp.tar.xz -C $W/src
cmake -S $W/src/llama.cpp -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DGGML_NATIVE=OFF > $W/cmake.log 2>&1 || { tail -30 $W/cmake.log; exit 1; }
cmake --build $W/build --target llama-server llama-quantize -j 16 > $W/build.log 2>&1 || { tail -40 $W/build.log; exit 1; }
echo "built after $SECONDS s"
mkdir -p $W/ol/bin $W/ol/lib/ollama
gunzip -c .devcarry/ollama-0.32.15-linux-amd64.gz > $W/ol/bin/ollama && chmod +x $W/ol/bin/ollama
cp $W/build/bin/llama-server $W/build/bin/llama-quantize $W/ol/lib/ollama/
if ldd $W/ol/bin/ollama | grep -q "not found"; then mkdir -p $W/syslib; cp .devcarry/libsqlite3.so.0 $W/syslib/; export LD_LIBRARY_PATH=$W/syslib:$LD_LIBRARY_PATH; fi
export PATH=$W/ol/bin:$PATH HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost
while [ ! -e /dev/shm/q.ok ]; do sleep 1; done
OLLAMA_HOST=127.0.0.1:11434 ollama serve > $W/logs/create.log 2>&1 &
sp=$!; for i in $(seq 60); do curl -s 127.0.0.1:11434/ >/dev/null && break; sleep 0.5; done
printf 'FROM /dev/shm/q.gguf\n' > $W/Modelfile && ollama create qwen3:14b -f $W/Modelfile > /dev/null 2>&1; echo "create: $?"
kill $sp; wait $sp 2>/dev/null; rm -f /dev/shm/q.gguf
python3 -c "import sys; sys.path.insert(0, 'benchmarks/vram'); import measure_ollama as m; exec(m.HOLDER)" 24564 > $W/holder.out 2>&1 &
for i in $(seq 120); do grep -q ready $W/holder.out && break; sleep 0.5; done; cat $W/holder.out
nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv
cfg=$W/cfg; mkdir -p $cfg
timeout 220 python3 -m app bench --managed --model qwen3:14b --parallel 1,2,4 --requests 8 --num-predict 48 --no-think \
  --config-dir $cfg --json $out/bench.json > $out/bench.txt 2> $out/bench.err; echo "bench: $?"
cat $out/bench.txt; tail -5 $out/bench.err
ls $cfg; cp $cfg/runtime_allowance.json $out/ 2>/dev/null; cat $cfg/runtime_allowance.json 2>/dev/null
total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits)
used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)
for np in 1 4 8; do
  echo "== estimate --parallel $np (card $total MiB, others $used MiB, reserve 615 MiB)"
  python3 -m app estimate --show tests/data/show_qwen3_14b.json --model-size 9000210784 --ollama-version 0.32.15 \
    --parallel $np --gpu-total-mib $total --gpu-used-mib $used --gpu-reserved-mib 615 --config-dir $cfg 2>&1
done > $out/estimates.txt
head -40 $out/estimates.txt
