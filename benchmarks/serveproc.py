"""A real ``ragmem serve`` in a subprocess, for the tests and the benchmarks.

    with ServeProcess(store, "--rate", "0") as srv:   # waits until it listens
        srv.url                                        # http://127.0.0.1:PORT
        srv.make_key("tenant-a")                       # `ragmem keys add` on the same store: the key

The process runs this interpreter's ``python -m ragmem`` with the caller's ``PYTHONPATH`` and
``HF_HUB_OFFLINE=1``; its stderr goes to a log file beside the store, printed in the error when it fails to start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    """The environment of a ragmem subprocess: this interpreter's import path, offline."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out["HF_HUB_OFFLINE"] = "1"
    return out


def ragmem(*args: str, store: str | Path | None = None, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run ``python -m ragmem [--store STORE] ARGS...`` and return the finished process (check=True)."""
    head = ["--store", str(store)] if store is not None else []
    return subprocess.run([sys.executable, "-m", "ragmem", *head, *extra, *args], env=env(), capture_output=True,
                          text=True, check=True, timeout=300)


class ServeProcess:
    """``ragmem --store STORE [GLOBAL...] serve --port N [ARGS...]`` until stopped."""

    def __init__(self, store: str | Path, *args: str, global_args: tuple[str, ...] = (), port: int | None = None) -> None:
        self.store, self.args, self.global_args = Path(store), args, global_args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log_path = self.store.parent / f"serve-{self.port}.log"

    def make_key(self, *namespaces: str) -> str:
        """A new key of this store bound to ``namespaces`` (the last line `ragmem keys add` prints)."""
        out = ragmem("keys", "add", *namespaces, store=self.store, extra=self.global_args)
        return out.stdout.strip().splitlines()[-1]

    def start(self, timeout: float = 180.0) -> "ServeProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragmem", "--store", str(self.store), *self.global_args, "serve",
             "--port", str(self.port), *self.args],
            env=env(), stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ragmem serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=1)
            except urllib.error.HTTPError as exc:
                if exc.code == 401:  # it answers (the probe needs a key too)
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"ragmem serve did not answer on {self.url} within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL at once (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> "ServeProcess":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
