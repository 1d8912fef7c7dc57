"""Probing a real node for a case's ``node:`` section: real scripts on a PATH, real interpreters asked for their
environment, a real process named like Ray's GCS daemon, a child under a lowered open-file limit."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotest.inputs.case_node import NodeRequirements
from autotest.run.node_preconditions import path_owner, probe_executable, probe_node, ray_daemons, unmet
from tests import waits


def _script(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_an_executable_is_traced_to_the_python_environment_it_runs_in(tmp_path):
    env_bin = tmp_path / "bin"
    _script(env_bin, "direct", f"#!{sys.executable}\n")
    _script(env_bin, "via-env", "#!/usr/bin/env python3\n")
    _script(env_bin, "long-path", f"#!/bin/sh\n'''exec' {sys.executable} \"$0\" \"$@\"\n' '''\n")
    _script(env_bin, "shell", "#!/bin/bash\necho hi\n")
    os.symlink(sys.executable, env_bin / "python")
    run_env = {"PATH": os.pathsep.join([str(env_bin), str(Path(sys.executable).parent), os.defpath])}
    for name in ("direct", "long-path"):
        found = probe_executable(name, run_env)
        assert found.path == str(env_bin / name) and found.prefix == sys.prefix, found
    # a venv's python linked from outside it runs in the base installation, not the venv: asked, not assumed
    outside = probe_executable("python", run_env)
    assert outside.path == str(env_bin / "python") and outside.prefix == sys.base_prefix
    inside = probe_executable("python", {"PATH": str(Path(sys.executable).parent)})
    assert inside.prefix == sys.prefix
    assert probe_executable("via-env", run_env).prefix is not None  # whichever python3 the PATH finds, asked
    shell = probe_executable("shell", run_env)
    assert shell.prefix is None and shell.note == "its first line '#!/bin/bash' names no Python"
    assert probe_executable("no-such-command", run_env).path is None


def test_a_path_is_owned_by_whoever_owns_the_link_itself(tmp_path):
    link = tmp_path / "ray_log"
    assert path_owner(str(link)).uid is None
    link.symlink_to(tmp_path / "nowhere")  # dangling: the link, not its target, is what the script replaces
    assert path_owner(str(link)).uid == os.getuid()
    if os.geteuid() == 0:
        os.lchown(link, 4242, 4242)
        assert path_owner(str(link)).uid == 4242


def test_a_process_named_like_ray_s_gcs_daemon_is_found_and_a_stranger_is_not():
    daemon = subprocess.Popen(["bash", "-c", "exec -a gcs_server sleep 60"])
    other = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = {d.pid: d for d in ray_daemons()}
            if daemon.pid in found:
                break
            time.sleep(0.05)
        assert found[daemon.pid].name == "gcs_server"
        assert other.pid not in found
    finally:
        for proc in (daemon, other):
            proc.kill()
            proc.wait()


def test_the_open_file_limit_is_the_launching_process_s_own(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = 1024 if hard == resource.RLIM_INFINITY or hard > 1024 else hard

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, lowered), lowered))

    probe = ("import json; from autotest.inputs.case_node import NodeRequirements as R; "
             "from autotest.run.node_preconditions import probe_node, unmet; "
             "facts = probe_node(R(open_files=65536), {}, slot_env={}, environ={}); "
             "print(json.dumps([facts.open_files_hard, unmet(R(open_files=65536), facts, 0)]))")
    done = waits.run([sys.executable, "-c", probe], capture_output=True, text=True, preexec_fn=lower,
                     check=True, limit_s=60)
    seen, problems = json.loads(done.stdout)
    assert seen == lowered
    if lowered < 65536 and not _can_raise():
        assert problems and problems[0].startswith(f"open files: the hard limit of the launching process is {lowered}")


def _can_raise() -> bool:
    status = Path("/proc/self/status").read_text()
    return bool(int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16) >> 24 & 1)


def test_no_requirement_probes_nothing():
    facts = probe_node(NodeRequirements(), {}, slot_env={}, environ={})
    assert (facts.executables, facts.paths, facts.ray_daemons, facts.gpus) == ((), (), (), None)
    assert unmet(NodeRequirements(), facts, 0) == []
