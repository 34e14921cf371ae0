"""The openai backend's server side only attaches: it asks the server for its models, never starts, stops or
restarts anything, and says where the settings of such a server live."""

from __future__ import annotations

import functools

from app.backends import registry
from app.backends.openai.attached import APPLY_HINT, NO_START
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from tests.backends.openai import vllm_transcripts as vllm
from tests.backends.openai.replay_server import json_reply, replay_server
from tests.bounded import run_within
from tests.fakes.raw_http import closed_port

run = functools.partial(run_within, timeout=20.0)


def control(port: int, statuses: list, logs: list):
    return registry.get("openai").server(ServerSettings(port=port), on_status=statuses.append, on_log=logs.append)


def test_a_server_that_answers_is_attached_and_left_running():
    statuses: list = []
    logs: list = []

    def route(_method, path):
        return json_reply(200, vllm.MODELS if path == "/v1/models" else vllm.VERSION)

    with replay_server(route) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        server_control = control(port, statuses, logs)

        async def go():
            started = await server_control.start()
            stopped = await server_control.stop()
            restarted = await server_control.restart(ServerSettings(port=port, num_parallel=8))
            await server_control.close()
            return started, stopped, restarted

        started, stopped, restarted = run(go)
        asked = [s.path for s in server.seen]
    assert started.state is ServerState.RUNNING_ATTACHED and started.version == "0.10.1"
    assert started.apply_hint == APPLY_HINT and not started.can_stop
    assert stopped is started and restarted is started  # nothing stopped, nothing restarted
    assert any("not restarted" in line for line in logs)
    assert server_control.server_pids() == ()
    assert set(asked) <= {"/v1/models", "/version"}  # it only asked


def test_nothing_answering_is_stopped_with_why_and_nothing_is_started():
    statuses: list = []
    server_control = control(closed_port(), statuses, [])

    async def go():
        status = await server_control.start()
        await server_control.close()
        return status

    status = run(go)
    assert status.state is ServerState.STOPPED
    assert NO_START in status.message and "Cannot connect" in status.message
