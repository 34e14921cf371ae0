"""A TCP connection that stamps every block it receives with the time the kernel received it,
and every send with the time the kernel sent it.

When 64 streams get a token in the same instant (a batched decode step does exactly that), a
single-threaded reader reaches the last socket up to a millisecond after the first; a stamp
taken by the reader would be that much late. On Linux the kernel records each packet's arrival
(SO_TIMESTAMPNS) and hands it over with the data, so the stamp is exact whatever the loop was
busy with. Sending is stamped the same way (SO_TIMESTAMPING, software transmit stamps, read from
the socket's error queue right after the send): a stamp taken by the caller just before the send
can be early by a whole GIL switch interval (5 ms and more) when another thread, a GUI's, takes
the GIL in between. Elsewhere, or if the kernel sends no stamp, the loop's own time is used.
"""

from __future__ import annotations

import asyncio
import platform
import socket
import struct
import sys
import time
from collections.abc import Callable

from app.core.units import KIB

# Linux's value on the architectures that use the generic socket numbers (not exported by Python's
# socket module); elsewhere another option may hide behind 35, so stamps are taken by the loop there.
SO_TIMESTAMPNS = 35
SO_TIMESTAMPING = 37
# SOF_TIMESTAMPING_TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY: a software stamp when each send
# leaves, reported alone (without the data) on the error queue.
_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)
_ERRQUEUE_BYTES = 512
# Both carry the software stamp as their first timespec.
_STAMP_KINDS = (SO_TIMESTAMPNS, SO_TIMESTAMPING)
_GENERIC_ABI = ("x86_64", "i686", "i386", "aarch64", "arm64", "armv7l", "armv8l", "riscv64", "ppc64le", "s390x")
_TIMESPEC = struct.Struct("@qq")
# Room for the receive stamp and, since transmit stamps are on, the SCM_TIMESTAMPING copy the kernel
# adds to every read (three timespecs): a buffer for one would truncate the second.
_ANCILLARY_BYTES = (socket.CMSG_SPACE(_TIMESPEC.size) + socket.CMSG_SPACE(3 * _TIMESPEC.size)
                    if hasattr(socket, "CMSG_SPACE") else 0)
RECV_BYTES = 256 * KIB

DataHandler = Callable[[bytes, float], None]
ClosedHandler = Callable[[BaseException | None], None]


class StampedSocket:
    """A connected non-blocking socket read by the running loop; see the module docstring."""

    def __init__(self, sock: socket.socket, clock: Callable[[], float], on_data: DataHandler,
                 on_closed: ClosedHandler) -> None:
        self._sock = sock
        self._clock = clock
        self._on_data = on_data
        self._on_closed = on_closed
        self._loop = asyncio.get_running_loop()
        self._closed = False
        # Kernel stamps are wall-clock times: usable only when our clock is the monotonic one.
        self.kernel_stamps = clock is time.monotonic and _enable_kernel_stamps(sock)
        self.send_stamps = self.kernel_stamps and _enable_send_stamps(sock)
        self.last_send_stamped = False  # the last send's time is the kernel's
        self._loop.add_reader(sock.fileno(), self._readable)

    @classmethod
    async def connect(cls, host: str, port: int, timeout_s: float, clock: Callable[[], float], on_data: DataHandler,
                      on_closed: ClosedHandler) -> StampedSocket:
        """Connect (OSError or asyncio.TimeoutError on failure) and start reading."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        error: OSError | None = None
        for family, kind, proto, _name, address in infos:
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await asyncio.wait_for(loop.sock_connect(sock, address), timeout_s)
            except (TimeoutError, OSError) as exc:
                sock.close()
                if isinstance(exc, asyncio.TimeoutError):
                    raise
                error = exc
                continue
            return cls(sock, clock, on_data, on_closed)
        raise error or OSError(f"no address for {host}:{port}")

    @property
    def closed(self) -> bool:
        """True once either side closed the connection."""
        return self._closed

    async def send(self, data: bytes) -> float:
        """Send all of data; returns when it left, on the clock (OSError when the connection broke).

        Without a kernel stamp the time is taken just before the send call, not after it: the call
        releases the GIL, and another thread that takes it then could hold it for milliseconds."""
        sent_at = self._clock()
        try:
            count = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            count = 0
        if count < len(data):  # the kernel's buffer was full: the request left when the rest did
            await self._loop.sock_sendall(self._sock, data[count:])
            sent_at = self._clock()
        self.last_send_stamped = False
        if self.send_stamps:
            kernel = self._sent_stamp()
            if kernel is not None and sent_at - 1.0 <= kernel <= self._clock():
                sent_at, self.last_send_stamped = kernel, True
        return sent_at

    def _sent_stamp(self) -> float | None:
        """The last transmit stamp on the error queue (emptied), as a time on the clock; None if none."""
        stamp = None
        while True:
            try:
                _data, ancillary, _flags, _address = self._sock.recvmsg(0, _ERRQUEUE_BYTES,
                                                                       socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except OSError:  # empty (BlockingIOError) or unreadable: keep what was found
                return stamp
            for level, kind, payload in ancillary:
                # With SO_TIMESTAMPNS on, the kernel reports transmit stamps in its format too.
                if level == socket.SOL_SOCKET and kind in _STAMP_KINDS and len(payload) >= _TIMESPEC.size:
                    stamp = _monotonic(payload)

    def close(self) -> None:
        """Stop reading and close the socket (no on_closed call)."""
        if not self._closed:
            self._closed = True
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()

    def _readable(self) -> None:
        # One read per wake-up: the selector calls again while data waits, and other sockets get
        # their turn in between.
        try:
            if self.kernel_stamps:
                data, ancillary, _flags, _address = self._sock.recvmsg(RECV_BYTES, _ANCILLARY_BYTES)
            else:
                data, ancillary = self._sock.recv(RECV_BYTES), []
        except (BlockingIOError, InterruptedError):
            if self.send_stamps:
                self._sent_stamp()  # a stamp left on the error queue wakes the selector: take it off
            return
        except OSError as exc:
            self._lost(exc)
            return
        now = self._clock()
        if not data:
            self._lost(None)
            return
        self._on_data(data, self._arrival(ancillary, now))

    def _arrival(self, ancillary: list[tuple[int, int, bytes]], now: float) -> float:
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind in _STAMP_KINDS and len(payload) >= _TIMESPEC.size:
                stamped = _monotonic(payload)
                # A clock step between arrival and now could give nonsense: keep it within the last second.
                return stamped if now - 1.0 <= stamped <= now else now
        return now

    def _lost(self, exc: BaseException | None) -> None:
        if self._closed:
            return
        self.close()
        self._on_closed(exc)


def _monotonic(timespec: bytes) -> float:
    """A kernel wall-clock timespec as a time.monotonic() value (s)."""
    seconds: int
    nanoseconds: int
    seconds, nanoseconds = _TIMESPEC.unpack_from(timespec)
    return (seconds * 1_000_000_000 + nanoseconds - _wall_minus_monotonic_ns()) / 1e9


def _wall_minus_monotonic_ns() -> int:
    """The wall clock's lead over the monotonic one (ns), read between two monotonic readings: a
    thread switch between the two clock reads would otherwise shift every stamp by its length."""
    best_width, best_offset = -1, 0
    for _ in range(3):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best_width < 0 or after - before < best_width:
            best_width, best_offset = after - before, wall - (before + after) // 2
        if best_width < 2_000:  # within 2 µs: as good as it gets
            break
    return best_offset


def _enable_send_stamps(sock: socket.socket) -> bool:
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _TX_FLAGS)
    except OSError:
        return False
    return True


def _enable_kernel_stamps(sock: socket.socket) -> bool:
    if not sys.platform.startswith("linux") or not _ANCILLARY_BYTES or platform.machine() not in _GENERIC_ABI:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


__all__ = ["StampedSocket"]
