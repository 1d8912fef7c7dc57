"""Check kinds: what a baseline check's ``scope:`` means, one module per kind, one registry.

Built in: ``stepwise``, ``percentile``, ``breaches``, ``final``, ``points``, ``window``, ``pooled``, ``slope``.
The baseline loader, the check engine (:mod:`autotest.judge.checks`), calibration, power, live fail-fast, triage and the
report ask :func:`scope_kind` (or :func:`find` for a result, whose scope may be a structural check's) and never
compare scope names; this registry's list is the only list of kinds.

A third-party kind is a :class:`~autotest.scopes.kind.Scope` subclass (or an instance of one) named by an entry
point in the ``rl_autotest.checks`` group, whose name is the scope name::

    [project.entry-points."rl_autotest.checks"]
    median = "my_checks.median:Median"

Plugins load lazily, once (:func:`load_plugins`): the first time a scope or a check key is not a built-in
kind's, or the whole list is asked for. A plugin that fails to load, to read its check or to judge it is one
line naming it (a :class:`~autotest.errors.UsageError`, or the check's ERROR), never a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

from autotest.errors import UsageError
from autotest.scopes.breaches import Breaches
from autotest.scopes.final import Final
from autotest.scopes.kind import Scope
from autotest.scopes.percentile import Percentile
from autotest.scopes.points import Points
from autotest.scopes.pooled import Pooled
from autotest.scopes.slope import Slope
from autotest.scopes.stepwise import Stepwise
from autotest.scopes.window import Window

__all__ = ["ENTRY_POINT_GROUP", "Scope", "ask", "find", "kinds", "load_plugins", "names", "plugin_of", "register",
           "scope_kind", "unknown"]

#: the entry point group third-party check kinds register in
ENTRY_POINT_GROUP = "rl_autotest.checks"

_KINDS: dict[str, Scope] = {kind.name: kind for kind in (Stepwise(), Percentile(), Breaches(), Final(), Points(),
                                                         Window(), Pooled(), Slope())}
#: the built-in check kinds' names (a plugin may register more)
BUILTIN = tuple(_KINDS)
_plugins_loaded = False
#: scope name -> the plugin that registered it (how errors name it); built-in kinds are not in it
_PLUGINS: dict[str, str] = {}


def register(kind: Scope | type[Scope], source: str = "") -> Scope:
    """Add ``kind`` (a Scope subclass or instance) under its ``name``; ``source`` names the plugin in errors."""
    where = source or repr(kind)
    try:
        instance = kind() if isinstance(kind, type) and issubclass(kind, Scope) else kind
    except Exception as exc:  # third-party code: one line naming it
        raise UsageError(f"check kind plugin {where}: {kind!r}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(instance, Scope):
        raise UsageError(f"check kind plugin {where}: {kind!r} is not a subclass of autotest.scopes.kind.Scope; "
                         "define a Scope subclass with a name")
    if not isinstance(instance.name, str) or not instance.name:
        raise UsageError(f"check kind plugin {where}: {type(instance).__name__} has no name; set name = '<scope>'")
    if type(instance).evaluate is Scope.evaluate:
        raise UsageError(f"check kind plugin {where}: {type(instance).__name__} defines no evaluate(spec, job)")
    if instance.name in _KINDS and _KINDS[instance.name] is not instance:
        raise UsageError(f"check kind plugin {where}: scope {instance.name!r} is already registered "
                         f"({type(_KINDS[instance.name]).__module__}); rename the plugin's scope")
    _KINDS[instance.name] = instance
    _PLUGINS[instance.name] = where
    return instance


def plugin_of(kind: Scope) -> str | None:
    """The plugin that registered ``kind`` (``'name' (module:attr)``), None for a built-in kind."""
    return _PLUGINS.get(kind.name)


def ask(kind: Scope, method: str, *args: Any, passing: tuple[type[BaseException], ...] = ()) -> Any:
    """``kind.<method>(*args)`` for a stage that asks a kind outside the check engine (calibration, power): a
    third-party kind that raises is one line naming its plugin (a :class:`~autotest.errors.UsageError`), never a
    traceback. ``passing``: the asking stage's own errors (raised by the tools it handed in), which go through."""
    plugin = plugin_of(kind)
    if plugin is None:
        return getattr(kind, method)(*args)
    try:
        return getattr(kind, method)(*args)
    except (UsageError, *passing):
        raise
    except Exception as exc:  # third-party code: one line naming it
        raise UsageError(f"check kind plugin {plugin} failed in {method}: {type(exc).__name__}: {exc}; "
                         "fix or uninstall the package that provides it") from None


def load_plugins() -> tuple[str, ...]:
    """Register every kind of the ``rl_autotest.checks`` entry point group (once); returns every scope name."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        for point in entry_points(group=ENTRY_POINT_GROUP):
            where = f"{point.name!r} ({point.value})"
            try:
                loaded = point.load()
            except Exception as exc:  # a broken plugin is one line naming it, never a traceback
                raise UsageError(f"check kind plugin {where} failed to load: {type(exc).__name__}: {exc}; "
                                 "fix or uninstall the package that provides it") from None
            kind = register(loaded, where)
            if kind.name != point.name:
                raise UsageError(f"check kind plugin {where}: entry point name {point.name!r} differs from its "
                                 f"scope name {kind.name!r}; name the entry point after the scope")
    return tuple(_KINDS)


def names() -> tuple[str, ...]:
    """Every scope name, plugins included (built-ins first, in the order the docs list them)."""
    return load_plugins()


def kinds(keys: Iterable[str] = ()) -> tuple[Scope, ...]:
    """Every registered kind; the plugins are loaded first if one of ``keys`` (a check's keys beyond the common
    ones) is read by no kind registered yet, so a baseline of built-in kinds reads no entry points."""
    if not _plugins_loaded and not set(keys) <= {key for kind in _KINDS.values() for key in kind.keys}:
        load_plugins()
    return tuple(_KINDS.values())


def find(name: object) -> Scope | None:
    """The kind of a result's scope, or None (a structural check's scope, or a kind no longer installed)."""
    if not isinstance(name, str):
        return None
    if name not in _KINDS:
        load_plugins()
    return _KINDS.get(name)


def unknown(name: object) -> tuple[str, str]:
    """The problem and the fix for a scope that is no kind: the known ones, and the nearest by spelling."""
    known = names()
    near = difflib.get_close_matches(name, known, n=1) if isinstance(name, str) else []
    hint = f"did you mean {near[0]!r}? " if near else ""
    return (f"{name!r} is not a check kind (known: {', '.join(known)})",
            f"{hint}write one of them (a third-party kind registers through the {ENTRY_POINT_GROUP} entry point)")


def scope_kind(name: str) -> Scope:
    """The kind registered as ``name``; a user error naming the known kinds if there is none."""
    kind = find(name)
    if kind is None:
        problem, fix = unknown(name)
        raise UsageError(f"scope {problem}; {fix}")
    return kind
