"""Keep one run out of another's way on a shared node: the framework's Python, a Ray cluster of its own.

Python. A case's ``launch.python`` names the framework environment's interpreter (``$FRAMEWORK_PYTHON``
on the node overrides it). Its folder goes first on the launched command's PATH and the harness venv's
``bin`` is dropped from that PATH, so ``python`` and ``ray`` inside ``run_rl.sh`` are the node's, with
its CUDA torch, ray and lmdeploy, never the harness's. ``${FRAMEWORK_PYTHON}`` in launch fields expands to
the resolved interpreter. A bare name (``python3``) is looked up on PATH without the harness venv.

Ray. A case that starts its own Ray (``launch.uses_ray``) gets, per attempt, two free ports exported as
``RAY_HEAD_PORT`` and ``RAY_DASHBOARD_PORT`` (xtuner's run_rl.sh honours both) and a short ``RAY_TMPDIR``
of its own (a Unix socket path must stay under 108 bytes, so not inside the results folder). After the
run the harness stops that cluster only: the processes whose command line names its GCS port or its
temp dir (``python -m autotest.run.isolation stop-ray``), never ``ray stop --force``, which stops every
cluster on the machine, a neighbour's included. A launch script that itself runs ``ray stop --force``
(xtuner's run_rl.sh does, first thing) can still stop a neighbour's cluster: the node-wide GPU slot
lock, which gives an 8-GPU case the node alone, is what keeps two such runs apart.

This module is also the cleanup command's program, so it imports only the standard library and
``autotest.errors``: the cleanup starts fast and works whatever the run did to its environment.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from autotest.run.proctable import own_processes
from autotest.errors import UsageError

PYTHON_ENV = "FRAMEWORK_PYTHON"
RAY_PORT_ENVS = ("RAY_HEAD_PORT", "RAY_DASHBOARD_PORT")
RAY_TMPDIR_ENV = "RAY_TMPDIR"
STOP_GRACE_S = 10.0


# ---------------------------------------------------------------- the framework's Python


def harness_bin() -> Path | None:
    """The harness venv's bin folder, or None when the harness does not run from a venv."""
    if sys.prefix == sys.base_prefix:
        return None
    return Path(sys.prefix) / "bin"


def path_without_harness(path: str) -> str:
    """PATH with the harness venv's bin (and a second copy of it, resolved) left out."""
    venv = harness_bin()
    if venv is None:
        return path
    drop = {str(venv), str(venv.resolve())}
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and p not in drop
                           and str(Path(p).resolve()) not in drop)


def resolve_python(wanted: str, where: str, environ: Mapping[str, str]) -> Path:
    """The interpreter ``wanted`` names: an absolute path, or a name found on PATH without the harness venv."""
    if os.sep in wanted:
        found = Path(wanted).expanduser()
        if not (found.is_file() and os.access(found, os.X_OK)):
            raise UsageError(f"{where}: {wanted!r} is not an executable file; set {PYTHON_ENV} or the case's "
                             "launch.python to the framework environment's python")
        return found.absolute()  # not resolved: a venv's python is a symlink that must stay in its venv
    hit = shutil.which(wanted, path=path_without_harness(environ.get("PATH", os.defpath)))
    if hit is None:
        raise UsageError(f"{where}: {wanted!r} is not on PATH (the harness venv left out); set {PYTHON_ENV} "
                         "to the framework environment's python")
    return Path(hit)


def python_env(wanted: str | None, where: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Env overrides that run the launch with the framework's Python: PATH and FRAMEWORK_PYTHON; {} if none.

    ``environ`` values win over ``wanted`` (the node knows its Python better than the case file).
    """
    chosen = environ.get(PYTHON_ENV) or wanted
    if not chosen:
        return {}
    origin = f"environment: {PYTHON_ENV}" if environ.get(PYTHON_ENV) else where
    python = resolve_python(chosen, origin, environ)
    rest = [p for p in path_without_harness(environ.get("PATH", os.defpath)).split(os.pathsep)
            if p != str(python.parent)]
    return {"PATH": os.pathsep.join([str(python.parent), *rest]), PYTHON_ENV: str(python)}


# ---------------------------------------------------------------- a Ray cluster per run


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free right now (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def cluster_pids(gcs_port: int, temp_dir: str | None) -> list[int]:
    """This user's processes that belong to the Ray cluster on ``gcs_port`` (or under ``temp_dir``).

    Ray's daemons name the cluster on their command line: gcs_server ``--gcs_server_port=P``, raylet,
    dashboard, log monitor and workers ``--gcs-address=HOST:P``; the session dir sits in the temp dir.
    """
    port = re.compile(rf"^--(?:gcs[-_]address|address)=\S*:{gcs_port}$|^--gcs_server_port={gcs_port}$")
    return [pid for pid, args in own_processes()
            if any(port.match(a) for a in args) or (temp_dir and any(temp_dir in a for a in args))]


def stop_cluster(gcs_port: int, temp_dir: str | None, grace_s: float = STOP_GRACE_S) -> list[int]:
    """SIGTERM the cluster's processes, SIGKILL after ``grace_s``, remove its temp dir; the pids stopped."""
    pids = cluster_pids(gcs_port, temp_dir)
    for pid in pids:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            _kill(pid, signal.SIGKILL)
    if temp_dir and Path(temp_dir).name.startswith("rlat-ray-"):
        shutil.rmtree(temp_dir, ignore_errors=True)  # only a folder this module named
    return pids


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2:][:1] not in ("Z", "X")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autotest.run.isolation",
                                     description="stop one Ray cluster, found by its GCS port and temp dir")
    sub = parser.add_subparsers(dest="command", required=True)
    stop = sub.add_parser("stop-ray")
    stop.add_argument("--gcs-port", type=int, required=True)
    stop.add_argument("--temp-dir", default=None)
    args = parser.parse_args(argv)
    pids = stop_cluster(args.gcs_port, args.temp_dir)
    print(f"stopped {len(pids)} process(es) of the Ray cluster on port {args.gcs_port}"
          + (f": {' '.join(map(str, pids))}" if pids else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
