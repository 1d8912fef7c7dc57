"""A third-party check kind as a plugin package would define it (registered by a fake entry point in the tests)."""

from __future__ import annotations

import statistics

from autotest.scopes.kind import Scope, error_name, fmt, in_range, passes


class Median(Scope):
    """``scope: median``: the median of the per-step errors, over every ``every``-th calibrated step."""

    name = "median"
    exclusive_keys = ("every",)
    keys = ("every",)

    def parse(self, sec):
        every = sec.get("every", 1)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            sec.fail("every", f"{every!r} is not a whole number >= 1", "write e.g. 2")
        return {"options": (("every", every),)}

    def describe(self, spec):
        return f"median of per-step errors (every {dict(spec.options).get('every', 1)} steps)"

    def parameters(self, spec):
        return {"every": dict(spec.options).get("every", 1)}

    def evaluate(self, spec, job):
        steps = in_range(job.cur if job.gold is None else job.gold, job.calibrated)[::self.parameters(spec)["every"]]
        points, missing, broken = job.compare(spec, steps, job.cur, job.gold)
        if missing or broken or not len(points):
            return job.error(f"{job.display}: steps missing or broken; cannot decide", points=points)
        value = statistics.median(points.error)
        ok = passes(value, spec.operator, spec.threshold)
        message = (f"{job.display}: median {error_name(spec)} {fmt(value)} {'' if ok else 'not '}{spec.operator} "
                   f"{spec.threshold:g}")
        return job.decide(ok, message, points=points, observed=value)


class NotAKind:
    name = "nothing"


class NoEvaluate(Scope):
    name = "median"


class Raising(Median):
    """A kind whose code has a bug: reading ``every: 0`` divides by it, judging always raises."""

    def parse(self, sec):
        return {"options": (("every", 1 // sec.get("every", 1)),)}

    def evaluate(self, spec, job):
        raise KeyError("golden")


class WrongField(Median):
    def parse(self, sec):
        return {"every": sec.get("every", 1)}
