"""The processes of one ``mpiexec`` job, found by session id.

The launcher is started in a session of its own (``start_new_session=True``), and every
rank stays in it: PRRTE puts each rank in a process group of its own (so killing the
launcher's group misses them) but not in another session, and a rank whose launcher
died keeps the session id too. So "what is left of this job" is "what is left in the
session", whoever its parent is now.
"""
from __future__ import annotations

import os
import signal
import time


def _stat(pid: int):
    """(state, parent pid, session id) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0].decode(), int(fields[1]), int(fields[3])


def in_session(sid: int) -> list:
    """The live (not zombie) processes whose session id is ``sid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[2] == sid and st[0] != "Z":
                found.append(int(entry))
    return found


def left_behind(sid: int, wait_s: float = 3.0) -> list:
    """The processes of session ``sid`` still there after up to ``wait_s`` seconds."""
    limit = time.monotonic() + wait_s
    while True:
        left = in_session(sid)
        if not left or time.monotonic() > limit:
            return left
        time.sleep(0.05)


def kill_session(sid: int) -> list:
    """SIGKILL every process of session ``sid`` (those are ours: the job's); returns them."""
    pids = in_session(sid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids
