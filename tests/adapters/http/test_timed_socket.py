"""The timestamping socket: a block carries the time the kernel received it, not the time it was read."""

from __future__ import annotations

import asyncio
import select
import socket
import sys
import time

import pytest

from app.adapters.http.timed_socket import StampedSocket


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel stamps are a Linux feature")
def test_a_block_read_late_keeps_the_kernels_arrival_time_and_a_send_its_departure() -> None:
    """Linux turns receive stamping on for the whole stack a moment after the first socket asks
    (deferred work); until then a block is stamped when it is read, as a user stamp would be. So
    exchange until the kernel stamps at arrival, then check that every later block keeps it."""

    async def exchange(sock: StampedSocket, peer: socket.socket, got: list[tuple[bytes, float]]
                       ) -> tuple[float, float, float, float]:
        got.clear()
        before_send = time.monotonic()
        sent_at = await sock.send(b"ping")
        assert peer.recv(4) == b"ping"
        peer.sendall(b"pong")
        # Wait (without letting the loop run) until the reply sits in the kernel, then note the time:
        # a stamp taken by the reader would come after it, the kernel's comes before.
        select.select([sock._sock], [], [], 5.0)
        queued = time.monotonic()
        while not got:
            await asyncio.sleep(0)
        assert got[0][0] == b"pong"
        return before_send, sent_at, got[0][1], queued

    async def go() -> tuple[list[tuple[float, float, float, float]], StampedSocket]:
        listener = socket.create_server(("127.0.0.1", 0))
        got: list[tuple[bytes, float]] = []
        sock = await StampedSocket.connect("127.0.0.1", listener.getsockname()[1], 3.0, time.monotonic,
                                           lambda data, t: got.append((data, t)), lambda _exc: None)
        peer, _ = listener.accept()
        try:
            deadline = time.monotonic() + 5.0
            while True:  # until the kernel stamps at arrival (bounded)
                before_send, sent_at, arrived, queued = await exchange(sock, peer, got)
                if arrived < queued or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.001)
            later = [await exchange(sock, peer, got) for _ in range(5)]
            return [(before_send, sent_at, arrived, queued), *later], sock
        finally:
            sock.close()
            peer.close()
            listener.close()

    rounds, sock = asyncio.run(go())
    assert sock.kernel_stamps and sock.send_stamps and sock.last_send_stamped
    for before_send, sent_at, arrived, queued in rounds:
        assert before_send <= sent_at < arrived < queued
