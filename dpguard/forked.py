"""The mechanism of dpguard.workers, loaded only when workers are forked (pickle and the
selector are start-up work a one-process review does not pay): os.fork, one pipe of chunk
numbers that the workers take from in turn, and one pipe back from each. No threads, no
semaphores (a container without /dev/shm runs it), nothing joined at exit. Whatever a worker
does not return is judged here, in order, as without workers: a chunk whose task raised (so an
error that stops the call is raised here, as itself), whose results do not pickle, or whose
worker died (killed, out of memory). A worker that cannot be forked leaves its share to the
others, or to this process; a worker dies with the process that forked it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import struct
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, NoReturn, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Files a worker takes at a time: enough to amortise a round trip, few enough that the
# workers finish together when some files cost 10x the median.
CHUNK = 8

# prctl(2): deliver a signal to this process when the one that forked it dies
_PR_SET_PDEATHSIG = 1
_NUMBER = struct.Struct("<I")  # a chunk's number on the task pipe (atomic: < PIPE_BUF)
_SIZE = struct.Struct("<Q")  # the length of a worker's pickled answer
# Chunk numbers are all written to the task pipe before any answer is read, so they must fit
# its buffer (64 KiB on Linux): past 4,096 chunks they grow instead.
_MAX_CHUNKS = 4096


def ordered(
    task: Callable[[Item], Result], items: Sequence[Item], processes: int
) -> Iterator[Result]:
    """`task` over `items` in up to `processes` forked workers, in order (module docstring).
    The results of a worker must pickle; what does not is judged here."""
    size = max(CHUNK, -(-len(items) // _MAX_CHUNKS))
    chunks = [range(i, min(i + size, len(items))) for i in range(0, len(items), size)]
    # A worker exits without flushing what it inherited, but the streams are flushed anyway:
    # nothing buffered here can then be in two processes.
    sys.stdout.flush()
    sys.stderr.flush()
    workers = _fork_workers(task, items, chunks, processes)
    try:
        following, answered = yield from _collect(workers)
        for number in range(following, len(chunks)):  # past the first no worker answered
            if number in answered:
                yield from answered.pop(number)
            else:
                yield from map(task, (items[i] for i in chunks[number]))
    finally:
        for pid, answers in workers.items():
            os.close(answers)
            with contextlib.suppress(OSError):  # stopped early: the rest is not wanted
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _fork_workers(
    task: Callable[[Item], Any],
    items: Sequence[Item],
    chunks: Sequence[range],
    processes: int,
) -> dict[int, int]:
    """Fork up to `processes` workers, give them every chunk's number, and return each
    one's pid and the pipe its answers come on (none when not even the task pipe could be
    made, or no fork succeeded: then everything is judged here)."""
    parent = os.getpid()
    try:
        numbers, give = os.pipe()
    except OSError:
        return {}
    workers: dict[int, int] = {}
    for _ in range(processes):
        try:
            answers, answer = os.pipe()
        except OSError:  # out of descriptors: the others share the work
            break
        try:
            pid = os.fork()
        except OSError:  # out of processes
            os.close(answers)
            os.close(answer)
            break
        if pid == 0:
            os.close(give)
            os.close(answers)
            for other in workers.values():
                os.close(other)
            _work(task, items, chunks, numbers, answer, parent)
        os.close(answer)
        workers[pid] = answers
    os.close(numbers)
    if workers:  # within the pipe's buffer: written at once, however slow the workers
        todo = memoryview(b"".join(_NUMBER.pack(n) for n in range(len(chunks))))
        while todo:
            todo = todo[os.write(give, todo) :]
    os.close(give)  # the workers stop at its end
    return workers


def _work(
    task: Callable[[Item], Any],
    items: Sequence[Item],
    chunks: Sequence[range],
    numbers: int,
    answer: int,
    parent: int,
) -> NoReturn:
    """A worker: take chunk numbers until there are none, answer each with its results. A
    chunk whose task raised or whose results do not pickle ends the worker unanswered: the
    parent judges it (and raises what the task raises, as itself)."""
    try:
        _die_with(parent)
        with os.fdopen(answer, "wb") as out:
            while raw := os.read(numbers, _NUMBER.size):
                (number,) = _NUMBER.unpack(raw)  # a short read raises: the rest is judged here
                results = [task(items[i]) for i in chunks[number]]
                blob = pickle.dumps((number, results), pickle.HIGHEST_PROTOCOL)
                out.write(_SIZE.pack(len(blob)) + blob)
                out.flush()
        code = 0
    except BaseException:  # whatever it was, the parent judges the chunk
        code = 1
    os._exit(code)  # no atexit handlers, no flushing of the parent's buffers


def _die_with(parent: int) -> None:
    """A worker's first step: it dies with the process that forked it. A parent killed alone
    (a CI timeout signals one process, not its group) would otherwise leave its workers
    running, and holding the job's output pipes open."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: the parent's own kill is the bound
        pass
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)


def _collect(workers: dict[int, int]) -> Generator[Any, None, tuple[int, dict[int, list[Any]]]]:
    """Yield the workers' results in chunk order as they come, until every worker has ended;
    return the number of the first chunk not yet yielded and the answers after it."""
    answered: dict[int, list[Any]] = {}
    following = 0
    buffers = {answers: bytearray() for answers in workers.values()}
    with selectors.DefaultSelector() as selector:
        for answers in buffers:
            selector.register(answers, selectors.EVENT_READ)
        while buffers:
            while following in answered:
                yield from answered.pop(following)
                following += 1
            for key, _ in selector.select():
                answers = int(key.fd)
                data = os.read(answers, 1 << 20)
                if not data:  # that worker ended
                    selector.unregister(answers)
                    del buffers[answers]
                    continue
                buffer = buffers[answers]
                buffer += data
                while len(buffer) >= _SIZE.size:
                    end = _SIZE.size + _SIZE.unpack_from(buffer)[0]
                    if len(buffer) < end:
                        break
                    number, results = pickle.loads(buffer[_SIZE.size : end])
                    del buffer[:end]
                    answered[number] = results
    while following in answered:
        yield from answered.pop(following)
        following += 1
    return following, answered
