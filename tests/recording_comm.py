"""A comm that records what a widget sends, as JupyterLab would receive it, and talks to it as the browser does.

`comm.create_comm` (what ipywidgets 8 opens comms with) is patched to this comm by the ``comms`` fixture
(tests/conftest.py), so tests see every message with its binary buffers. Messages "from the browser" go in
through the same comm's `handle_msg`, as ipykernel delivers them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from comm.base_comm import BaseComm

__all__ = ["RecordingComm", "run_threads", "wait_until", "with_buffers"]


class RecordingComm(BaseComm):
    """A comm that keeps every published message (type, data, buffers as bytes, time)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.messages: list[dict[str, Any]] = []
        self._record_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        record = {
            "type": msg_type,
            "data": data,
            "buffers": [bytes(b) for b in (buffers or [])],
            "time": time.perf_counter(),
        }
        with self._record_lock:
            self.messages.append(record)

    # --- reading what was sent

    def snapshot(self) -> list[dict[str, Any]]:
        with self._record_lock:
            return list(self.messages)

    def states(self) -> list[dict[str, Any]]:
        """The state of the open message and of every update, buffers put back in place."""
        out = []
        for m in self.snapshot():
            data = m["data"] or {}
            if m["type"] == "comm_open" or data.get("method") == "update":
                out.append(with_buffers(data["state"], data.get("buffer_paths", []), m["buffers"]))
        return out

    def frames(self) -> list[dict[str, Any]]:
        return [s for s in self.states() if s.get("frame") is not None]

    # --- talking to the widget as the browser does

    def from_browser(self, **state: Any) -> None:
        self.handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})

    def control(self, action: str) -> None:
        self.handle_msg(
            {"content": {"data": {"method": "custom", "content": {"type": "control", "action": action}}}, "buffers": []}
        )


def with_buffers(state: dict, paths: list, buffers: list[bytes]) -> dict:
    """Put binary buffers back at their paths (what the browser's widget manager does)."""
    state = dict(state)
    for path, buffer in zip(paths, buffers):
        obj = state
        for key in path[:-1]:
            obj[key] = dict(obj[key]) if isinstance(obj[key], dict) else list(obj[key])
            obj = obj[key]
        obj[path[-1]] = buffer
    return state


def run_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("headsne-run")]


def wait_until(condition, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)
