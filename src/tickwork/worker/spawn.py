"""Starting a child process off the event loop; its pipes and its exit watched by the loop.

``loop.subprocess_exec`` runs fork/exec (``_posixsubprocess.fork_exec``, about 4 ms a call
here) on the loop's own thread: in bench/shell_starts.py it was 53 % of a shell-heavy worker's
loop time, so one worker started at most one process at a time (189 starts/s against 1,044/s
for bare ``Popen`` on threads). A :class:`Spawner` runs ``subprocess.Popen`` on a few threads
instead (fork_exec releases the GIL while the child execs), so starts of one worker overlap
and the loop keeps serving heartbeats; the loop then reads the child's pipes and learns of its
exit from a pidfd (Linux), or from a thread blocked in ``wait`` elsewhere.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

#: The child's stdout (1) and stderr (2), as the callback is told them.
OnOutput = Callable[[int, str], None]


class Child:
    """A started process: ``exited`` resolves when it exits (whatever holds its pipes),
    ``drained`` when both its stdout and stderr are closed; output goes to ``on_output`` as
    text, decoded as UTF-8 with invalid bytes replaced (a character split across reads kept
    whole)."""

    def __init__(
        self, proc: subprocess.Popen[bytes], on_output: OnOutput, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._on_output = on_output
        self._decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in (1, 2)}
        self._pipes: list[asyncio.BaseTransport] = []
        self._pidfd: int | None = None

    @property
    def returncode(self) -> int | None:
        """The exit code, or minus the signal that killed it; None while it runs."""
        return self.proc.returncode

    async def _attach(self) -> None:
        for fd, pipe in ((1, self.proc.stdout), (2, self.proc.stderr)):
            assert pipe is not None
            transport, _ = await self._loop.connect_read_pipe(partial(_PipeReader, self, fd), pipe)
            self._pipes.append(transport)
        self._watch_exit()

    def _watch_exit(self) -> None:
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # not Linux >= 5.3: a thread waits instead
            waiter = threading.Thread(target=self._wait_on_thread, daemon=True)
            waiter.start()
            return
        self._loop.add_reader(self._pidfd, self._on_pidfd)

    def _wait_on_thread(self) -> None:
        self.proc.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            self._loop.call_soon_threadsafe(self._set_exited)

    def _on_pidfd(self) -> None:
        if self.proc.poll() is not None:
            self._stop_pidfd()
            self._set_exited()

    def _stop_pidfd(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _set_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def _received(self, fd: int, data: bytes) -> None:
        if text := self._decoders[fd].decode(data):
            self._on_output(fd, text)

    def _pipe_closed(self, fd: int) -> None:
        decoder = self._decoders.pop(fd, None)
        if decoder is not None and (tail := decoder.decode(b"", final=True)):
            self._on_output(fd, tail)
        if not self._decoders and not self.drained.done():
            self.drained.set_result(None)

    def close(self) -> None:
        """Stop reading its pipes and watching it (it is not killed: that is the caller's)."""
        for pipe in self._pipes:
            pipe.close()
        self._stop_pidfd()
        if self.proc.returncode is None:
            # Reaped when it ends, so it never lingers as a zombie.
            threading.Thread(target=self.proc.wait, daemon=True).start()


class _PipeReader(asyncio.Protocol):
    def __init__(self, child: Child, fd: int) -> None:
        self._child = child
        self._fd = fd

    def data_received(self, data: bytes) -> None:
        self._child._received(self._fd, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._child._pipe_closed(self._fd)


class Spawner:
    """Starts processes in their own session, stdin ``/dev/null``, stdout/stderr piped, on
    ``threads`` threads of its own (a worker's slots start their processes in parallel)."""

    def __init__(self, threads: int = 4) -> None:
        self._threads = ThreadPoolExecutor(threads, thread_name_prefix="tickwork-spawn")

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        on_output: OnOutput,
    ) -> Child:
        """Start ``argv``; raise the ``OSError`` of a failed start. Cancelled meanwhile, the
        process (once started) is killed with its group and reaped."""
        loop = asyncio.get_running_loop()

        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
            )

        starting = self._threads.submit(popen)
        try:
            proc = await asyncio.shield(asyncio.wrap_future(starting))
        except asyncio.CancelledError:
            # Told on the spawner's thread, not the loop's: the loop may be closed by then.
            starting.add_done_callback(_abandon)
            raise
        child = Child(proc, on_output, loop)
        try:
            await child._attach()
        except BaseException:
            _kill_group(proc.pid)
            child.close()
            raise
        return child


def _abandon(starting: Future[subprocess.Popen[bytes]]) -> None:
    if starting.cancelled() or starting.exception() is not None:
        return
    proc = starting.result()
    _kill_group(proc.pid)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    proc.wait()  # killed: at once


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
