"""The real servers the tests run against, also used by the benchmarks and ``.ci/run``.

:class:`PostgresServer` is a throw-away PostgreSQL server. It runs the distribution's binaries (``initdb``, ``pg_ctl``) over a temp
cluster on 127.0.0.1 and a free port, with password authentication over TCP so
the wrong-credentials fault can be tested. PostgreSQL refuses to run as root:
as root, the cluster belongs to a system user (``pgrun``, created once).

    python tests/servers.py start DIR   # prints the URL; the server runs on
    python tests/servers.py stop DIR

Any failure raises :class:`RuntimeError` with the server's log: a test run
without its database must fail loudly, never skip.

:class:`ChromaServer` is a real ``chroma run`` on 127.0.0.1 and a free port.

They live under ``tests/`` so the tests import nothing from ``benchmarks/``; the
benchmarks put this folder on ``sys.path`` and import them from here.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

USER = "ragmem"
PASSWORD = "ragmem-test-secret"
DATABASE = "ragmem"
OS_USER = "pgrun"


def pg_bindir() -> Path:
    """The folder of ``initdb`` and ``pg_ctl``: $PG_BINDIR, the newest /usr/lib/postgresql/*/bin, or PATH."""
    if os.environ.get("PG_BINDIR"):
        return Path(os.environ["PG_BINDIR"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    exe = shutil.which("initdb")
    if exe:
        return Path(exe).parent
    raise RuntimeError(
        "PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin or on PATH); "
        "install it with `apt-get install -y postgresql` or set PG_BINDIR"
    )


def _reachable(folder: Path) -> bool:
    """Whether every existing parent of ``folder`` lets other users through (o+x)."""
    for parent in folder.parents:
        if parent.exists() and not parent.stat().st_mode & 0o001:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One PostgreSQL cluster in ``folder`` on 127.0.0.1; :meth:`start`, :meth:`stop`, :meth:`restart`."""

    def __init__(self, folder: str | os.PathLike[str], port: int | None = None) -> None:
        self.folder = Path(folder).absolute()
        if os.geteuid() == 0 and not _reachable(self.folder):
            # the cluster's owner must reach its folder (pytest's temp dirs are private to root)
            self.folder = Path(tempfile.mkdtemp(prefix="ragmem-pg-"))
        self.data = self.folder / "data"
        self.port = port or free_port()
        self.bindir = pg_bindir()
        self.log = self.folder / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    def url_for(self, database: str = DATABASE, *, user: str = USER, password: str = PASSWORD) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    # -- running as the cluster's owner ------------------------------------
    def _as_owner(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", OS_USER, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, **kw)

    def _ensure_os_user(self) -> None:
        if os.geteuid() != 0:
            return
        if subprocess.run(["id", "-u", OS_USER], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--system", "--create-home", OS_USER], check=True, capture_output=True)
        shutil.chown(self.folder, OS_USER)

    def _check(self, what: str, proc: subprocess.CompletedProcess) -> None:
        if proc.returncode != 0:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"PostgreSQL {what} failed ({proc.returncode}): {proc.stderr.strip()}\n{tail}")

    def init(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._ensure_os_user()
        pwfile = self.folder / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            shutil.chown(pwfile, OS_USER)
        self._check("initdb", self._as_owner([
            self.bindir / "initdb", "-D", self.data, "-U", USER, f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C.UTF-8",
        ]))
        pwfile.unlink()
        with open(self.data / "postgresql.conf", "a") as f:
            # a test server: no fsync wait per commit would hide nothing we test (a kill -9 of a client,
            # a clean or fast server restart); the benchmarks turn it back on
            f.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{self.folder}'\n"
                "max_connections = 200\nshared_buffers = 128MB\n"
            )

    def start(self, timeout: float = 60.0) -> None:
        if not (self.data / "PG_VERSION").exists():
            self.init()
        self._check("start", self._as_owner(
            [self.bindir / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", str(int(timeout)), "start"]
        ))
        self._ensure_database()

    def _ensure_database(self) -> None:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.url_for("postgres"), autocommit=True, connect_timeout=5) as conn:
                    if not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (DATABASE,)).fetchone():
                        conn.execute(f"CREATE DATABASE {DATABASE}")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._check("stop", self._as_owner([self.bindir / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"]))

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


class ChromaServer:
    """A real `chroma run` on 127.0.0.1 and a free port, over a data folder that outlives restarts."""

    def __init__(self, path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self._log = None

    def start(self, timeout: float = 60.0) -> None:
        import urllib.request

        exe = Path(sys.executable).with_name("chroma")
        exe = str(exe) if exe.exists() else shutil.which("chroma")
        assert exe, "the `chroma` CLI (from the chromadb package) is not installed"
        self._log = open(Path(self.path).parent / f"chroma-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            [exe, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"`chroma run` exited with {self.proc.returncode}; see {self._log.name}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"`chroma run` did not come up on {self.url} within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        self.stop()
        self.start()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(__doc__)
        return 2
    folder = Path(argv[1])
    if argv[0] == "start":
        server = PostgresServer(folder)
        server.start()
        (folder / "url").write_text(server.url)
        print(server.url)
    else:
        port_file = folder / "data" / "postgresql.conf"
        if port_file.exists():
            PostgresServer(folder, port=1).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
