"""A case's ``node:`` section: what its launch script assumes of the node, checked before launch.

A framework's own launch script can die in its first seconds for reasons that are the node's, not the code's:
xtuner's ``run_rl.sh`` runs under ``set -e`` and raises the open-file limit, calls ``python`` and ``ray`` bare,
deletes and re-links a node-wide ``/tmp/ray_log``, stops every Ray cluster of its user first, and the MOPD
recipe places its processes on absolute GPU ordinals. A case declares these assumptions here;
:mod:`autotest.run.node_preconditions` probes the node and lists every unmet one in one ERROR before launch.

    node:
      open_files: 65536            # the script runs `ulimit -n 65536` under `set -e`
      executables: [python, ray]   # called bare: on the run's PATH, in the framework's Python environment
      owned_paths: [/tmp/ray_log]  # node-wide paths it deletes or re-links: absent or this user's
      exclusive_ray: true          # it runs `ray stop --force`: no Ray cluster of this user may be running
      whole_node: true             # it uses absolute GPU ordinals: the run's GPU slot must be the whole node

Every key is optional; a case without the section assumes nothing of the node.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotest.inputs.schema import Section

#: key -> what it declares (the docs row and the field's docstring say the same)
NODE_KEYS = {
    "open_files": "the open-file limit the script raises to (`ulimit -n N` under `set -e`): the launching "
                  "process's hard RLIMIT_NOFILE must reach it",
    "executables": "commands the script calls bare: each must be on the run's PATH and run in the framework "
                   "Python's environment (launch.python / $FRAMEWORK_PYTHON)",
    "owned_paths": "node-wide paths the script deletes or re-links: each must be absent or owned by the "
                   "runner's user",
    "exclusive_ray": "the script stops every Ray cluster of its user (`ray stop --force`) and may join one "
                     "(`ray.init(address=\"auto\")`): no raylet or gcs_server of this user may be running",
    "whole_node": "the script places processes on absolute GPU ordinals: the run's GPU slot must be every GPU "
                  "of the node (platform.gpus equal to the node's count, no CUDA_VISIBLE_DEVICES narrowing it)",
}


@dataclass(frozen=True)
class NodeRequirements:
    """The ``node:`` section of a case."""

    open_files: int | None = None
    """The hard open-file limit the launch script raises to (None: it raises none)."""
    executables: tuple[str, ...] = ()
    """Commands the script calls bare, looked up on the run's PATH."""
    owned_paths: tuple[str, ...] = ()
    """Absolute node-wide paths the script deletes or re-links."""
    exclusive_ray: bool = False
    """The script stops (and may join) any Ray cluster of its user."""
    whole_node: bool = False
    """The script partitions the node's GPUs by absolute ordinal."""

    def describe(self) -> str:
        """One line for the experiment card: what the node must be."""
        parts = []
        if self.open_files is not None:
            parts.append(f"hard open-file limit >= {self.open_files}")
        if self.executables:
            parts.append(f"{', '.join(f'`{e}`' for e in self.executables)} from the framework's Python on PATH")
        parts += [f"`{p}` absent or this user's" for p in self.owned_paths]
        if self.exclusive_ray:
            parts.append("no other Ray cluster of this user")
        if self.whole_node:
            parts.append("the GPU slot is the whole node")
        return "; ".join(parts) or "none declared"


def parse_node(sec: Section | None, gpus: int) -> NodeRequirements | None:
    """The validated ``node:`` section (None when the case has none); each mistake one line naming the key.

    ``gpus`` is the case's ``platform.gpus``: ``whole_node`` needs a GPU case.
    """
    if sec is None:
        return None
    sec.check_keys(required=(), optional=tuple(NODE_KEYS))
    open_files = None
    if "open_files" in sec.data:
        open_files = sec.integer("open_files", minimum=1,
                                 fix="write the number the script passes to `ulimit -n`, e.g. 65536")
    executables = sec.str_list("executables", default=[])
    for i, name in enumerate(executables):
        if "/" in name or name != name.strip() or not name.strip():
            sec.fail(f"executables[{i}]", f"{name!r} is not a bare command name",
                     "write the name the script calls without a folder, e.g. python")
    owned_paths = sec.str_list("owned_paths", default=[])
    for i, path in enumerate(owned_paths):
        if not path.startswith("/"):
            sec.fail(f"owned_paths[{i}]", f"{path!r} is not an absolute path",
                     "write the node-wide path as the script names it, e.g. /tmp/ray_log")
    whole_node = sec.boolean("whole_node", default=False)
    if whole_node and gpus <= 0:
        sec.fail("whole_node", "is true but platform.gpus is 0",
                 "set platform.gpus to the GPU count the script partitions, or remove whole_node")
    return NodeRequirements(open_files=open_files, executables=executables, owned_paths=owned_paths,
                            exclusive_ray=sec.boolean("exclusive_ray", default=False), whole_node=whole_node)
