#!/usr/bin/env bash
# The real Ollama 0.32.15 and llama-server on one CUDA GPU, whole and as a simulated 24 GiB card: builds
# llama.cpp's llama-server with CUDA and lays out Ollama beside it (build_cuda_ollama.sh), writes
# three model shapes to /dev/shm and runs measure_ollama.py over them. Runs detached (setsid) so that several
# device calls can follow it; every call copies what is measured so far to OUT.
# Usage: bash benchmarks/vram/run_ollama_fit.sh start|wait OUT SECONDS   (from the repository root, with
# .devcarry/ holding lcpp.tar.xz, ollama-0.32.15-linux-amd64.gz and libsqlite3.so.0)
set -u
verb=${1:?start|wait}; out=${2:?OUT}; secs=${3:-560}
W=/tmp/vram; mkdir -p $W/logs $W/out
t0=$(date +%s)
collect() { cp $W/out/*.json "$out/" 2>/dev/null; tail -c 20000 $W/run.log > "$out/run_tail.log" 2>/dev/null; }
if [ "$verb" = start ]; then
  cat > $W/job.sh <<'JOB'
#!/usr/bin/env bash
set -u
W=/tmp/vram; R=$1; cd "$R"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
(for s in qwen3-14b llama3.1-8b gemma3-12b; do python3 benchmarks/vram/make_gguf.py --shape $s /dev/shm/$s.gguf && touch /dev/shm/$s.ok; done) > $W/make_gguf.log 2>&1 &
bash benchmarks/vram/build_cuda_ollama.sh $W || exit 1
source $W/env.sh
echo "built after $SECONDS s"
M="python3 benchmarks/vram/measure_ollama.py --ollama $W/ol/bin/ollama --llama-server $W/ol/lib/ollama/llama-server --logdir $W/logs --load-timeout 150"
waitg() { while [ ! -e /dev/shm/$1.ok ]; do sleep 1; done; }
waitg qwen3-14b
$M --gguf /dev/shm/qwen3-14b.gguf --shape qwen3-14b --out $W/out/whole_qwen3-14b.json --deadline-s 200 \
   --plan "1:default:f16 4:default:f16 16:default:q8_0"
$M --gguf /dev/shm/qwen3-14b.gguf --shape qwen3-14b --out $W/out/sim24_qwen3-14b.json --hold-free-mib 24564 --deadline-s 900 \
   --plan "1:default:f16 4:default:f16 1:8192:f16 4:8192:f16 1:default:q8_0 4:default:q8_0 8:8192:q8_0 16:8192:f16 2:default:f16 8:default:f16 16:default:q8_0"
rm -rf /dev/shm/olmodels
$M --mode llama-server --gguf /dev/shm/qwen3-14b.gguf --shape qwen3-14b --out $W/out/server_qwen3-14b.json --hold-free-mib 24564 --deadline-s 300 \
   --plan "16:default:f16 4:default:f16 4:8192:q8_0"
rm -f /dev/shm/qwen3-14b.gguf
for s in llama3.1-8b gemma3-12b; do
  waitg $s
  $M --gguf /dev/shm/$s.gguf --shape $s --out $W/out/sim24_$s.json --hold-free-mib 24564 --deadline-s 420 \
     --plan "1:default:f16 4:default:f16 1:8192:q8_0 8:8192:f16 4:default:q8_0 16:8192:q8_0 8:default:f16 16:default:f16"
  rm -rf /dev/shm/olmodels /dev/shm/$s.gguf
done
echo "all done after $SECONDS s"
JOB
  chmod +x $W/job.sh
  setsid nohup bash $W/job.sh "$PWD" > $W/run.log 2>&1 < /dev/null &
fi
while [ $(( $(date +%s) - t0 )) -lt "$secs" ]; do
  grep -q "all done" $W/run.log 2>/dev/null && break
  pgrep -f "$W/job.sh" > /dev/null || break
  sleep 10
done
collect
tail -n 60 $W/run.log
