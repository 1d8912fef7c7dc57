"""The live process table from /proc: sessions, groups and descendants (stdlib only).

Shared by the launcher and the watchdog; the watchdog runs as its own small program, so this
module imports nothing of the harness.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: how often the launcher and the watchdog record a run's process tree (a read of the whole table costs
#: milliseconds on a busy machine)
TRACK_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks after boot: tells a reused pid apart


def process_table() -> list[Proc]:
    """Live processes from /proc (zombies are dead: left out); empty where there is no /proc."""
    table = []
    for entry in Path("/proc").iterdir() if Path("/proc/self/stat").exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if fields[0] not in ("Z", "X"):
            table.append(Proc(int(entry.name), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])))
    return table


def own_processes(skip: frozenset[int] | None = None) -> Iterator[tuple[int, list[str]]]:
    """This user's live processes as (pid, argv), this process and its parent left out (or ``skip``); a process
    that exits while the table is read is left out too. Empty where there is no /proc."""
    mine = skip if skip is not None else frozenset({os.getpid(), os.getppid()})
    for entry in Path("/proc").iterdir() if Path("/proc/self").exists() else ():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        yield int(entry.name), [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def session_members(sid: int) -> list[int]:
    """Live processes in session or process group ``sid``."""
    return [p.pid for p in process_table() if sid in (p.pgrp, p.session)]


def descendants(root: int) -> dict[int, int]:
    """{pid: start time} of every live descendant of ``root``, whatever its session."""
    return _below(process_table(), [root])


def session_tree(sid: int) -> dict[int, int]:
    """{pid: start time} of the members of session or group ``sid`` and of every live descendant of theirs,
    whatever its session; one read of the process table."""
    table = process_table()
    members = [p for p in table if sid in (p.pgrp, p.session)]
    return {**{p.pid: p.start for p in members}, **_below(table, [p.pid for p in members])}


def _below(table: list[Proc], roots: list[int]) -> dict[int, int]:
    children: dict[int, list[Proc]] = {}
    for proc in table:
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = {}, list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child.pid not in found:
                found[child.pid] = child.start
                todo.append(child.pid)
    return found


def alive_as_recorded(tracked: dict[int, int]) -> list[int]:
    """The pids of ``tracked`` ({pid: start time}) still running as the same process."""
    live = {p.pid: p.start for p in process_table()}
    return [pid for pid, start in tracked.items() if live.get(pid) == start]
