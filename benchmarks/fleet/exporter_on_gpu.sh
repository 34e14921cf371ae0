#!/usr/bin/env bash
# The app's Prometheus exporter on a real NVIDIA GPU (NVML), scraped by the real Prometheus (Debian's 2.42 binary,
# carried): another process holds most of the card, as a second program on a desktop would; the exporter's GPU
# figures are then queried through Prometheus's HTTP API and set beside nvidia-smi's.
# Usage (repository root, on the GPU machine): bash benchmarks/fleet/exporter_on_gpu.sh OUT
#   .devcarry/whl/*.whl: platformdirs, gguf, prometheus-client, keyring and its pure-Python dependencies;
#   .devcarry/prometheus.gz: /usr/bin/prometheus from Debian's package, gzipped.
set -u
out=${1:?OUT}; W=/tmp/expgpu; mkdir -p $W/tsdb
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .devcarry/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
gunzip -c .devcarry/prometheus.gz > $W/prometheus && chmod +x $W/prometheus
python3 -c "import sys; sys.path.insert(0, 'benchmarks/vram'); import measure_ollama as m; exec(m.HOLDER)" 24564 > $W/holder.out 2>&1 &
holder=$!
for i in $(seq 240); do grep -q ready $W/holder.out && break; sleep 0.5; done; cat $W/holder.out
python3 -m app exporter --listen 127.0.0.1:9464 --interval 1 --config-dir $W/cfg > $out/exporter.out 2> $out/exporter.err &
exp=$!
for i in $(seq 60); do curl -sf 127.0.0.1:9464/metrics > /dev/null && break; sleep 0.5; done
cat > $W/prometheus.yml <<'YML'
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: ollama-deck
    static_configs: [{targets: ['127.0.0.1:9464']}]
YML
$W/prometheus --config.file=$W/prometheus.yml --storage.tsdb.path=$W/tsdb --web.listen-address=127.0.0.1:9090 \
  > $W/prometheus.log 2>&1 &
prom=$!
for i in $(seq 120); do
  curl -s '127.0.0.1:9090/api/v1/query?query=ollama_deck_gpu_memory_used_bytes' | grep -q '"value"' && break; sleep 0.5
done
sleep 3
curl -s 127.0.0.1:9464/metrics > $out/metrics.txt
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,memory.used,memory.reserved,utilization.gpu,power.draw,temperature.gpu \
  --format=csv > $out/nvidia-smi.csv 2>&1 || nvidia-smi --query-gpu=name,uuid,memory.total,memory.used --format=csv > $out/nvidia-smi.csv
{
  echo '{'
  first=1
  for q in ollama_deck_gpu_memory_total_bytes ollama_deck_gpu_memory_used_bytes ollama_deck_gpu_memory_reserved_bytes \
           ollama_deck_gpu_utilization_ratio ollama_deck_gpu_power_watts ollama_deck_gpu_temperature_celsius \
           ollama_deck_host_memory_total_bytes ollama_deck_server_up 'up{job="ollama-deck"}'; do
    [ $first = 1 ] || echo ','; first=0
    printf '"%s": ' "${q//\"/\\\"}"; curl -s -G 127.0.0.1:9090/api/v1/query --data-urlencode "query=$q"
  done
  echo ','; printf '"prometheus_version": '; curl -s 127.0.0.1:9090/api/v1/status/buildinfo
  echo '}'
} > $out/prometheus_query_gpu.json
kill $prom $exp $holder 2>/dev/null; wait $exp 2>/dev/null; echo "exporter exit: $?"
cat $out/nvidia-smi.csv; grep -v '^#' $out/metrics.txt | grep gpu; tail -3 $out/exporter.err
