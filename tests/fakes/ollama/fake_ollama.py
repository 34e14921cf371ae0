"""A protocol-faithful stand-in Ollama server for tests (stdlib only).

It speaks Ollama's HTTP API on a real socket: the same paths, fields, status codes, error texts and
NDJSON stream shape as the real 0.32.15 was recorded answering (tests/data/ollama/real/, compared by
tests/fakes/ollama/test_recorded_real.py), paces tokens on a drift-free schedule so measured rates
match the configuration, queues requests beyond `num_parallel`, and can be told to fail in each way
the real server does (`fail_next`). It reports the recorded version unless told another; where eras
differ (a quantized KV cache without flash attention: f16 before 0.30, a failing llama-server from
0.30) it follows the version it reports.

Semantics worth knowing: decode slots are shared by all models; the default context is 4096
(Ollama before 0.15.5, and a machine without a GPU after) unless `context_length` says otherwise;
`/api/show` always carries `tensors` and `verbose` only fills the long tokenizer arrays; an unknown
model on chat/generate is 404 `model 'x' not found`; OLLAMA_MAX_QUEUE bounds only the requests that
wait for a model to load (a loaded model's requests wait in its runner, unbounded).
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from dataclasses import replace
from http.server import ThreadingHTTPServer
from typing import Any
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from tests.fakes.ollama.fake_ollama_http import OOM_MESSAGE, HttpMixin, RecordedRequest, FailRule
from tests.fakes.ollama.fake_ollama_models import FakeModel, default_models, default_registry
from tests.fakes.ollama.fake_ollama_sched import QUEUE_FULL_MESSAGE, SchedulerMixin
from tests.fakes.ollama.fake_ollama_wire import parse_keep_alive, rfc3339_local, slog_line
from tests.fakes.ollama.recorded import real_version

__all__ = ["FakeModel", "FakeOllama", "RecordedRequest", "QUEUE_FULL_MESSAGE", "OOM_MESSAGE"]


def _env_int(env: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(env.get(key, "") or default)
    except ValueError:
        return default


def _env_bool(env: Mapping[str, str], key: str) -> bool | None:
    text = env.get(key, "").strip().lower()
    if not text:
        return None
    return text in ("1", "true", "t", "yes", "on")


class FakeOllama(HttpMixin, SchedulerMixin):
    """A stand-in `ollama serve`: start() on a background thread or serve_forever() in front."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, models: list[FakeModel] | None = None,
                 version: str | None = None, tokens_per_s: float = 200.0, prompt_tokens_per_s: float = 2000.0,
                 load_s: float = 0.0, thinking_tokens: int = 20, answer_tokens: int = 30,
                 num_parallel: int = 1, max_queue: int = 512, context_length: int | None = None,
                 kv_cache_type: str = "f16", flash_attention: bool | None = None,
                 log: Callable[[str], None] | None = None, keep_alive: str | float = "5m",
                 registry: list[FakeModel] | None = None, pull_s: float = 0.0,
                 gpu_memory_bytes: int | None = None, decode_slowdown: float = 0.0,
                 answer_text: str | None = None, offline: bool = False,
                 unfinished_prompt: str = "", unfinished_after: int = 3) -> None:
        self.version = version or real_version()
        # No registry to reach: pulls fail as the real server's did with the network closed.
        self.offline = offline
        # A scripted answer, streamed a word (with its leading whitespace) per token; None: filler words.
        self.answer_text = answer_text
        # A streamed reply to a prompt holding this text ends after `unfinished_after` tokens with a proper end of
        # the chunked body but without its final `done: true` record, as Ollama 0.32.15 ends some replies ("": none).
        self.unfinished_prompt = unfinished_prompt
        self.unfinished_after = max(0, int(unfinished_after))
        # Per-token time grows by this fraction for every other slot decoding at once (0: none).
        self.decode_slowdown = max(0.0, float(decode_slowdown))
        self.tokens_per_s = float(tokens_per_s)
        self.prompt_tokens_per_s = float(prompt_tokens_per_s)
        self.load_s = float(load_s)
        self.thinking_tokens = int(thinking_tokens)
        self.answer_tokens = int(answer_tokens)
        self.num_parallel = max(1, int(num_parallel))
        self.max_queue = max(0, int(max_queue))
        self.context_length = context_length
        self.kv_cache_type = kv_cache_type or "f16"
        self.flash_attention = flash_attention
        self.keep_alive_s = parse_keep_alive(keep_alive)
        self.pull_s = float(pull_s)
        self.gpu_memory_bytes = gpu_memory_bytes
        self.on_log: Callable[[str], None] | None = log
        self.models: dict[str, FakeModel] = {m.name: m for m in (models if models is not None else default_models())}
        self.registry: dict[str, FakeModel] = {m.name: m for m in (registry if registry is not None else default_registry())}
        self.requests: list[RecordedRequest] = []
        self.loaded: dict[str, dict[str, Any]] = {}
        self._expires: dict[str, float] = {}
        self._lock = threading.RLock()
        self._load_lock = threading.Lock()
        self._slot_cv = threading.Condition()
        self._active = 0
        self._loading = 0
        self._queue: deque[object] = deque()
        self._rules: list[FailRule] = []
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._serving_ident: int | None = None
        self._serve_started = threading.Event()
        self._thread: threading.Thread | None = None
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class(), bind_and_activate=True)
        self._httpd.daemon_threads = True
        self.host = host
        self.port: int = self._httpd.server_address[1]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        self.url = f"http://{shown}:{self.port}"

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides: Any) -> FakeOllama:
        """Configure from OLLAMA_* variables the way `ollama serve` reads them at start."""
        host, port = "127.0.0.1", 11434
        raw = env.get("OLLAMA_HOST", "").strip()
        if raw:
            hostport = urlsplit(raw if "://" in raw else f"http://{raw}").netloc
            name, _, port_text = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
            host = name.strip("[]") or host
            port = int(port_text) if port_text else port
        kwargs: dict[str, Any] = {
            "num_parallel": _env_int(env, "OLLAMA_NUM_PARALLEL", 1) or 1,
            "max_queue": _env_int(env, "OLLAMA_MAX_QUEUE", 512) or 512,
            "context_length": _env_int(env, "OLLAMA_CONTEXT_LENGTH", 0) or None,
            "kv_cache_type": env.get("OLLAMA_KV_CACHE_TYPE", "") or "f16",
            "flash_attention": _env_bool(env, "OLLAMA_FLASH_ATTENTION"),
        }
        keep_alive = env.get("OLLAMA_KEEP_ALIVE", "").strip()
        if keep_alive:
            kwargs["keep_alive"] = float(keep_alive) if keep_alive.lstrip("-").isdigit() else keep_alive
        kwargs.update(overrides)
        return cls(host, kwargs.pop("port", port), **kwargs)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeOllama:
        """Serve on a daemon thread; returns once the socket is accepting."""
        self._thread = threading.Thread(target=self.serve_forever, name=f"fake-ollama-{self.port}", daemon=True)
        self._thread.start()
        self._serve_started.wait()
        return self

    def serve_forever(self) -> None:
        """Serve until stop() (blocking)."""
        self._serving_ident = threading.get_ident()
        self.log(slog_line("INFO", "routes.go:1475", "server config", env=self._env_summary()))
        self.log(slog_line("INFO", "routes.go:1528", f"Listening on {self.host}:{self.port} (version {self.version})"))
        self._serve_started.set()
        try:
            self._httpd.serve_forever(poll_interval=0.05)
        finally:
            self._close_all()

    def stop(self) -> None:
        """Stop serving and cut open connections (streams in flight end abruptly)."""
        self._stopping.set()
        with self._slot_cv:
            self._slot_cv.notify_all()
        if self._serving_ident == threading.get_ident():
            threading.Thread(target=self._httpd.shutdown, daemon=True).start()
            return
        if self._serve_started.is_set():
            self._httpd.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._close_all()

    def _close_all(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- logging ------------------------------------------------------------------------------
    def log(self, line: str) -> None:
        """Pass one Ollama-style log line to `on_log`."""
        if self.on_log is not None:
            self.on_log(line)

    def _env_summary(self) -> str:
        fa = "" if self.flash_attention is None else str(self.flash_attention).lower()
        return (f"map[OLLAMA_CONTEXT_LENGTH:{self.context_length or 0} OLLAMA_FLASH_ATTENTION:{fa} "
                f"OLLAMA_HOST:http://{self.host}:{self.port} OLLAMA_KV_CACHE_TYPE:{self.kv_cache_type} "
                f"OLLAMA_MAX_QUEUE:{self.max_queue} OLLAMA_NUM_PARALLEL:{self.num_parallel}]")

    # ---- model store ------------------------------------------------------------------------
    @staticmethod
    def full_name(name: str) -> str:
        """`name` with ":latest" added when it has no tag, as Ollama resolves names."""
        return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"

    def find_model(self, name: str) -> FakeModel | None:
        """The local model called `name` (":latest" implied), or None."""
        with self._lock:
            return self.models.get(self.full_name(name))

    def registry_model(self, name: str) -> FakeModel | None:
        """The model `/api/pull` would fetch for `name`, or None."""
        return self.registry.get(self.full_name(name))

    def add_model(self, model: FakeModel) -> None:
        """Store (or replace) a local model, stamped as modified now."""
        with self._lock:
            self.models[model.name] = replace(model, modified_at=rfc3339_local(time.time()))

    def remove_model(self, name: str) -> bool:
        """Delete a local model; False if there was none."""
        with self._lock:
            return self.models.pop(self.full_name(name), None) is not None
