"""PyYAML behind :func:`autotest.inputs.schema.load_yaml`: duplicate keys and alias bombs refused before any value is
built, the libyaml parser where it is safe. Its own module so that importing the schema (every command's parser)
does not import PyYAML."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from autotest.errors import UsageError

#: a hand-written case or baseline uses a few aliases; a billion-laughs document needs many, or
#: few that expand to an exponential number of values (each alias of a list repeats all of it)
MAX_ALIASES = 1_000
MAX_EXPANDED_NODES = 1_000_000


class _AliasBomb(yaml.YAMLError):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem, self.mark = problem, mark


class _UniqueKeys:
    """Refuses duplicate keys (and keys that are not names) before any value is built."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):  # a `? [complex, key]`: no setting is named so
                raise yaml.constructor.ConstructorError(None, None, "a key is a list or a mapping, not a name",
                                                        key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys and alias bombs before any value is built."""

    _aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _AliasBomb(f"more than {MAX_ALIASES} aliases", self.peek_event().start_mark)
        return super().compose_node(parent, index)

    def get_single_node(self) -> Any:
        root = super().get_single_node()
        if root is not None and self._aliases:
            _check_expansion(root)
        return root



if hasattr(yaml, "CSafeLoader"):  # PyYAML built with libyaml: the same constructor over a C parser

    class _UniqueKeyCLoader(_UniqueKeys, yaml.CSafeLoader):  # type: ignore[misc, name-defined]
        """The fast path for files without anchors (so without aliases): duplicate keys refused as above."""
else:
    _UniqueKeyCLoader = None  # type: ignore[assignment, misc]


def _check_expansion(root: yaml.Node) -> None:
    """Count the values the node graph expands to (each node once, memoised), without building any."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes and sizes[id(node)] >= 0:
            continue
        children = [] if isinstance(node, yaml.ScalarNode) else \
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        if children_done:
            sizes[id(node)] = total = 1 + sum(sizes[id(child)] for child in children)
            if total > MAX_EXPANDED_NODES:
                raise _AliasBomb(f"aliases expand to more than {MAX_EXPANDED_NODES:,} values", node.start_mark)
            continue
        if sizes.get(id(node)) == -1:  # met again while its own children are being counted
            raise _AliasBomb("an alias refers to a value that contains it (recursive)", node.start_mark)
        sizes[id(node)] = -1
        stack.append((node, True))
        for child in children:
            if sizes.get(id(child), 0) == -1:
                raise _AliasBomb("an alias refers to a value that contains it (recursive)", child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))


def load_yaml(path: Path) -> Any:
    """Parse one YAML file; unreadable files, bad syntax and duplicate keys are one-line errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc}); "
                         "check the file") from None
    return load_yaml_text(text, str(path))


def load_yaml_text(text: str, path: str) -> Any:
    """Parse YAML text read from elsewhere (a file at a commit: ``path`` names it as ``file@sha``), with the errors
    of :func:`load_yaml`."""
    if _UniqueKeyCLoader is not None and "&" not in text and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        # 5-8x faster on a golden table; PyYAML's reader refuses what the guard excludes, and any problem is
        # re-read below for PyYAML's own one-line message
        try:
            return yaml.load(text, Loader=_UniqueKeyCLoader)
        except (yaml.YAMLError, ValueError, TypeError):
            pass
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _AliasBomb as exc:
        raise UsageError(f"{path}:{exc.mark.line + 1}: {exc.problem} (an alias bomb?); "
                         "write the values out instead of repeating aliases") from None
    except yaml.reader.ReaderError as exc:  # a control character: no mark, a character position
        line = text.count("\n", 0, exc.position) + 1
        raise UsageError(f"{path}:{line}: character #x{exc.character:04x} is not allowed in YAML "
                         "(a binary or corrupt file?); remove it") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        fix = "keep one" if problem.startswith("duplicate key") else "fix the YAML syntax"
        raise UsageError(f"{path}{line}: {problem}; {fix}") from None


def line_of(path: Path, keys: list[str | int]) -> int | None:
    """The 1-based line of the value at ``keys`` (mapping keys and list indexes) in the YAML file, for an error
    line; None when the file no longer parses or the key is not there. Only read on an error path."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    line = None
    for key in keys:
        if isinstance(node, yaml.MappingNode) and isinstance(key, str):
            found = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
            if found is None:
                return line
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line
