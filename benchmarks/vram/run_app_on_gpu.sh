#!/usr/bin/env bash
# The app's own commands on one CUDA GPU simulated as a 24 GiB card, against the real Ollama 0.32.15: a managed
# sweep (which teaches the runtime figure and records the server's own peak beside the card's), then `estimate`
# with the figure it learnt. Builds llama.cpp's CUDA llama-server and lays out Ollama with build_cuda_ollama.sh.
# Usage: bash benchmarks/vram/run_app_on_gpu.sh OUT   (repository root; .devcarry/ as for run_ollama_fit.sh, plus
# whl/ with the platformdirs and gguf wheels)
set -u
out=${1:?OUT}; W=/tmp/vram; mkdir -p $W/logs
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .devcarry/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
(python3 benchmarks/vram/make_gguf.py --shape qwen3-14b /dev/shm/q.gguf > $W/gguf.log 2>&1; touch /dev/shm/q.ok) &
bash benchmarks/vram/build_cuda_ollama.sh $W || exit 1
source $W/env.sh
echo "built after $SECONDS s"
export HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost
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
