"""A real PostgreSQL server for the tests: initdb + pg_ctl in a temporary folder, on a unix socket.

Root cannot run postgres, so as root the server runs as the ``postgres`` user (Debian's package
creates it) through ``runuser``. Missing binaries skip the tests here and fail them under CI=true.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from tests import waits


@dataclass(frozen=True)
class PostgresServer:
    socket_dir: Path
    port: int
    user: str

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@/{database}?host={self.socket_dir}&port={self.port}"


def find_bin_dir() -> Path | None:
    """Debian keeps the server binaries out of PATH, under /usr/lib/postgresql/<version>/bin."""
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[4]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def start(bin_dir: Path) -> tuple[PostgresServer, Path]:
    base = Path(tempfile.mkdtemp(prefix="rl-autotest-pg-"))
    base.chmod(0o755)
    data, sockets = base / "data", base / "socket"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sockets, "postgres")
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
    waits.run(_as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", user,
                               "--no-sync", "-E", "UTF8"]), check=True, capture_output=True, limit_s=120)
    port = _free_port()
    options = f"-k {sockets} -p {port} -c listen_addresses='' -c fsync=off"
    waits.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-t", "60",
                               "-l", str(base / "server.log"), "start"]),
              check=True, capture_output=True, limit_s=90)
    return PostgresServer(sockets, port, user), base


def stop(bin_dir: Path, base: Path) -> None:
    waits.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(base / "data"), "-m", "fast", "-w",
                               "stop"]), capture_output=True, limit_s=60)
    shutil.rmtree(base, ignore_errors=True)
