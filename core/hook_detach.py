"""``memlens hook`` without the agent waiting for the write: the recording moves to a detached child process.

An agent waits for its hook command to exit, on every tool call. So the command reads the event, takes a place in
the store's hook queue, forks and exits at once; the child leaves the agent's session and pipes, imports the store,
waits until every hook child queued before it has ended (a session's events land in the order they arrived), and
records the event exactly as an inline hook would (:func:`memlens.hooks.record`).

The queue is :data:`ORDER_NAME` beside the store: a ticket counter (a number, never any text of an event) and one
byte-range lock per ticket. A child holds the lock on its own ticket's byte for its whole life and waits for the
lock on its predecessor's byte; the kernel releases a process's locks when it ends, however it ends, so a child
that crashes never stalls the queue. The parent keeps the counter locked until its child holds its byte, so the
next child can never find that byte free before it was taken.

This module imports only the standard library and :mod:`memlens.errors`: it runs in the process the agent waits for.
"""

from __future__ import annotations

import os
import stat

from memlens.errors import StoreEnvironmentError

#: Hook input beyond this many bytes is not read: the event is dropped with a note in hook.log. Real events are
#: far smaller; parsing and redacting megabytes would hold the agent (or, detached, the next events) up for seconds.
MAX_INPUT_BYTES = 1_000_000
#: The hook queue beside the store (a ticket number and locks; never the text of an event).
ORDER_NAME = "hook-order.lock"
#: A child that has waited this long for the one before it records its event anyway (out of order, and logged):
#: a hook's own work is bounded by the store's lock timeouts, so only a stuck process waits this long.
TURN_TIMEOUT_SECONDS = 60.0
#: Byte 0 of the queue file is the counter's lock; ticket n's lock is the byte at _SLOTS_AT + n % _SLOTS.
_SLOTS_AT = 64
_SLOTS = 1 << 20

# O_NOFOLLOW: a link planted in place of a side file would have the hook write, or truncate, whatever it points
# to. O_NONBLOCK: opening a FIFO planted there for writing would otherwise wait for a reader forever.
_SIDE_FILE_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def open_side_file(path: str | os.PathLike[str], flags: int) -> int:
    """A descriptor on ``path`` (a file beside the store), opened with ``flags`` without following a symbolic link,
    and only if it is a regular file, owned by this user, with no other hard link; StoreEnvironmentError otherwise.
    FileNotFoundError when it does not exist and ``flags`` has no O_CREAT."""
    try:
        fd = os.open(path, flags | _SIDE_FILE_FLAGS, 0o600)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise StoreEnvironmentError(f"{os.fspath(path)} is a symbolic link; memlens does not write through links (remove it)") from None
        raise StoreEnvironmentError(f"{os.fspath(path)} cannot be opened: {exc.strerror}") from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif hasattr(os, "getuid") and info.st_uid != os.getuid():
        problem = "belongs to another user"
    elif info.st_nlink > 1:
        problem = "has other hard links"
    if problem:
        os.close(fd)
        raise StoreEnvironmentError(f"{os.fspath(path)} {problem}; memlens leaves it alone (remove it)")
    return fd


def can_detach() -> bool:
    """True where a hook can hand its write to a detached child (POSIX: fork and byte-range locks)."""
    return hasattr(os, "fork") and hasattr(os, "setsid") and os.name == "posix"


class Turn:
    """A detached child's place in its store's hook queue, held until the process ends."""

    def __init__(self, fd: int, ticket: int) -> None:
        self.fd = fd
        self.ticket = ticket

    def wait(self, timeout: float = TURN_TIMEOUT_SECONDS) -> bool:
        """Block until the hook child queued just before this one has ended (at once if it has); False when it
        was still running after ``timeout`` seconds. Call it from the main thread (it times out with SIGALRM)."""
        import fcntl
        import signal

        def give_up(signum: int, frame: object) -> None:
            raise TimeoutError

        before = _slot(self.ticket - 1)
        previous = signal.signal(signal.SIGALRM, give_up)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, before)
        except TimeoutError:
            return False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        # Only its end mattered; the next child waits on this child's own byte, not on that one.
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, before)
        return True


def fork_in_line(folder: str) -> Turn | None:
    """Fork a detached child queued behind every earlier detached hook of the store in ``folder``.

    Returns None in the parent once the child holds its place: the parent has nothing left to do and should exit
    with status 0. Returns the child's :class:`Turn` in the child, which has its own session and its standard
    streams on /dev/null (the agent's pipes close when the parent exits); the child should call :meth:`Turn.wait`
    before writing and end with ``os._exit``. Raises OSError or StoreEnvironmentError, before forking or when the
    child died before taking its place, if it cannot be done here: the caller then records the event itself.
    """
    import fcntl

    fd = open_side_file(os.path.join(folder, ORDER_NAME), os.O_RDWR | os.O_CREAT)
    pipe: tuple[int, ...] = ()
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)  # the counter, until the child holds its ticket's byte
        ticket = _take_ticket(fd)
        pipe = ready, signal_ready = os.pipe()
        pid = os.fork()
    except BaseException:
        for each in (fd, *pipe):
            os.close(each)
        raise
    if pid == 0:
        try:
            os.close(ready)
            os.setsid()  # out of the agent's process group: not killed with it, no terminal signals
            _quiet_stdio()
            fcntl.lockf(fd, fcntl.LOCK_EX, 1, _slot(ticket))  # free: only a ticket _SLOTS back could hold it
            os.write(signal_ready, b".")
            os.close(signal_ready)
        except BaseException:
            os._exit(1)  # the parent sees the pipe close without a byte and records the event itself
        return Turn(fd, ticket)
    try:
        os.close(signal_ready)
        took_place = os.read(ready, 1) == b"."
    finally:
        os.close(ready)
        os.close(fd)  # releases the counter's lock (this process's locks on the file go with its last descriptor)
    if not took_place:
        os.waitpid(pid, 0)  # it has ended; reap it here rather than leave a zombie for this process's lifetime
        raise OSError("the detached hook process ended before taking its place in the queue")
    return None


def wait_for_queue(folder: str, timeout: float = TURN_TIMEOUT_SECONDS) -> bool:
    """Block until every detached hook child queued so far for the store in ``folder`` has ended (they end in
    queue order); False if one was still running after ``timeout`` seconds. For benchmarks and tests: the agent
    never waits for this."""
    try:
        fd = open_side_file(os.path.join(folder, ORDER_NAME), os.O_RDWR)
    except FileNotFoundError:
        return True  # no hook has ever been detached here
    try:
        import fcntl

        fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            next_ticket = int(os.read(fd, 32) or b"0")
        except ValueError:
            next_ticket = 0
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        return Turn(fd, next_ticket).wait(timeout)  # waits for the child holding the ticket before next_ticket
    finally:
        os.close(fd)


def _take_ticket(fd: int) -> int:
    """The next ticket number, counted in the queue file (the caller holds the counter's lock)."""
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        ticket = int(os.read(fd, 32) or b"0") % _SLOTS
    except ValueError:
        ticket = 0  # a damaged counter only costs ordering against the children already queued
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"%020d\n" % ((ticket + 1) % _SLOTS))
    return ticket


def _slot(ticket: int) -> int:
    return _SLOTS_AT + ticket % _SLOTS


def _quiet_stdio() -> None:
    """Point standard input, output and error at /dev/null (the agent's pipes stay open while anyone holds them)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)
