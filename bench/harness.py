"""Cases, the ways to compute them (implementations) and how each way is timed.

A :class:`Case` builds its inputs once, says how much work an ideal implementation must do
(:class:`Work`, for the floors) and lists :class:`Comparison`\\ s: on one engine ("cpu" or
"gpu"), skyconv against the anchor tool. An implementation (:class:`Impl`) is a list of
*steps*: the first step takes the case's inputs, each later one the previous step's output.

Timing rules, the same for every implementation:

- the first ``warmup`` calls are not timed (NVRTC compilation, cupy's kernel cache, page
  faults); the output of the first one is kept to compare against the anchor's;
- then calls are repeated until at least ``repeats`` samples and ``min_time`` seconds, but stop
  early (with at least 3 samples) once ``budget`` seconds have passed; the median is reported;
- ``e2e``: wall clock around the whole call from NumPy arrays to NumPy arrays, transfers
  included;
- ``device`` (GPU only): skyconv's own CUDA-event stage timings from
  ``skyconv.last_profile()`` summed over the steps (all stages but ``h2d``, ``d2h`` and
  ``total``), or for cupy, CUDA events around the steps run on inputs already on the device.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TRANSFER_STAGES = ("h2d", "d2h", "total")

Step = Callable[..., Any]


@dataclass(frozen=True)
class Settings:
    """How hard to time: see the module docstring."""

    quick: bool = False
    warmup: int = 1
    repeats: int = 5
    min_time: float = 0.5
    budget: float = 60.0


@dataclass(frozen=True)
class Work:
    """The least an ideal implementation must do, for the floors.

    ``bytes``: memory traffic (reads + writes) of the computation itself; ``flops``: float64
    operations (multiply and add count one each); ``h2d_bytes`` / ``d2h_bytes``: what an
    end-to-end GPU call must move across the bus, once each way.
    """

    bytes: float = 0.0
    flops: float = 0.0
    h2d_bytes: float = 0.0
    d2h_bytes: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(
            self.bytes + other.bytes,
            self.flops + other.flops,
            self.h2d_bytes + other.h2d_bytes,
            self.d2h_bytes + other.d2h_bytes,
        )


class Context:
    """What a case's ``inputs`` function gets: the size setting and a cache shared by cases."""

    def __init__(self, quick: bool):
        self.quick = quick
        self._cache: dict[Any, Any] = {}

    def cache(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()`` once per run for ``key`` (e.g. one random cube for a whole family)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


# --------------------------------------------------------------------------- helpers


def _as_steps(steps: Step | Sequence[Step]) -> list[Step]:
    if callable(steps):
        return [steps]
    steps = list(steps)
    if not steps or not all(callable(s) for s in steps):
        raise TypeError("steps must be a callable or a non-empty sequence of callables")
    return steps


def _as_tuple(inputs: Any) -> tuple:
    return inputs if isinstance(inputs, tuple) else (inputs,)


def run_steps(steps: Sequence[Step], inputs: tuple, after_step: Callable[[], None] | None = None):
    """Apply ``steps`` in order: ``steps[0](*inputs)``, then each to the previous output."""
    out = steps[0](*inputs)
    if after_step:
        after_step()
    for step in steps[1:]:
        out = step(out)
        if after_step:
            after_step()
    return out


def tree_map(fn: Callable[[Any], Any], x: Any) -> Any:
    """Apply ``fn`` to every leaf of nested tuples/lists/dicts (e.g. to move arrays)."""
    if isinstance(x, tuple):
        return tuple(tree_map(fn, v) for v in x)
    if isinstance(x, list):
        return [tree_map(fn, v) for v in x]
    if isinstance(x, dict):
        return {k: tree_map(fn, v) for k, v in x.items()}
    return fn(x)


def leaves(x: Any) -> list:
    """The leaves of nested tuples/lists/dicts, in order."""
    out: list = []
    tree_map(out.append, x)
    return out


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Median, min, max, count and the samples themselves (milliseconds)."""
    vals = [float(v) for v in values]
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "n": len(vals),
        "samples": [round(v, 6) for v in vals],
    }


def rel_err(got: Any, ref: Any) -> float | None:
    """max |got - ref| / max |ref| over all output arrays (None when shapes differ).

    Integer and boolean outputs (masks) give the fraction of elements that differ instead.
    """
    g_leaves, r_leaves = leaves(got), leaves(ref)
    if len(g_leaves) != len(r_leaves):
        return None
    if all(np.asarray(x).dtype.kind in "biu" for x in g_leaves + r_leaves):
        if any(np.shape(g) != np.shape(r) for g, r in zip(g_leaves, r_leaves)):
            return None
        differ = sum(
            int(np.count_nonzero(np.asarray(g) != np.asarray(r)))
            for g, r in zip(g_leaves, r_leaves)
        )
        return differ / max(1, sum(np.size(r) for r in r_leaves))
    worst_diff, scale = 0.0, 0.0
    for g, r in zip(g_leaves, r_leaves):
        g = np.asarray(g, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            return None
        fin = np.isfinite(r) & np.isfinite(g)
        if r.size:
            worst_diff = max(worst_diff, float(np.max(np.abs(g[fin] - r[fin]), initial=0.0)))
            scale = max(scale, float(np.max(np.abs(r[fin]), initial=0.0)))
    return worst_diff / scale if scale > 0 else worst_diff


def timed_loop(call: Callable[[], tuple[Any, dict[str, float]]], settings: Settings):
    """Warm up, then repeat ``call`` (returning ``(output, {metric: ms})``) per the settings.

    Returns the first warm-up output and ``{metric: [ms, ...]}``.
    """
    first = None
    for i in range(max(1, settings.warmup)):
        out, _ = call()
        if i == 0:
            first = out
        del out
    samples: dict[str, list[float]] = {}
    n = 0
    t0 = time.perf_counter()
    while True:
        _, sample = call()
        n += 1
        for k, v in sample.items():
            samples.setdefault(k, []).append(v)
        elapsed = time.perf_counter() - t0
        if n >= settings.repeats and elapsed >= settings.min_time:
            break
        if elapsed >= settings.budget and n >= 3:
            break
        if n >= 1000:
            break
    return first, samples


# --------------------------------------------------------------------------- implementations


class Impl:
    """One way to compute a case: ``label`` names the library (e.g. "scipy.ndimage").

    ``steps``: a callable or a list of callables (see the module docstring). ``requires``:
    importable module names; a missing one makes the implementation *skipped*, never an error.
    ``threads``: how many CPU threads it uses, when known (recorded).
    """

    engine = "cpu"

    def __init__(
        self,
        label: str,
        steps: Step | Sequence[Step],
        *,
        requires: Sequence[str] = (),
        threads: int | None = None,
        note: str = "",
    ):
        self.label = label
        self.steps = _as_steps(steps)
        self.requires = tuple(requires)
        self.threads = threads
        self.note = note

    def unavailable(self) -> str | None:
        """Why this implementation cannot run here, or None."""
        for mod in self.requires:
            try:
                if importlib.util.find_spec(mod) is None:
                    return f"{mod} is not installed"
            except (ImportError, ValueError) as e:
                return f"{mod} cannot be found: {e}"
        return None

    def measure(self, inputs: tuple, settings: Settings) -> tuple[Any, dict[str, Any]]:
        """Time the implementation: returns (first output, measurement dict)."""
        out, samples = timed_loop(lambda: self._call(inputs), settings)
        return out, self._record(samples)

    def _call(self, inputs: tuple) -> tuple[Any, dict[str, float]]:
        t0 = time.perf_counter()
        out = run_steps(self.steps, inputs)
        return out, {"e2e": (time.perf_counter() - t0) * 1e3}

    def _record(self, samples: dict[str, list[float]]) -> dict[str, Any]:
        rec: dict[str, Any] = {"status": "ok", "e2e_ms": summarize(samples.pop("e2e"))}
        rec["device_ms"] = summarize(samples.pop("device")) if "device" in samples else None
        if samples:
            rec["stages_ms"] = {k: summarize(v) for k, v in samples.items()}
        return rec

    def describe(self) -> dict[str, Any]:
        """Static facts recorded beside the measurement."""
        d: dict[str, Any] = {"label": self.label, "engine": self.engine}
        if self.threads is not None:
            d["threads"] = self.threads
        if self.note:
            d["note"] = self.note
        return d


class Host(Impl):
    """A CPU implementation: NumPy in, NumPy out, wall clock only."""


class Skyconv(Host):
    """skyconv on the CPU: records skyconv's thread count."""

    def __init__(self, steps, **kw):
        kw.setdefault("requires", ("skyconv",))
        super().__init__(kw.pop("label", "skyconv"), steps, **kw)

    def describe(self) -> dict[str, Any]:
        import skyconv

        d = super().describe()
        d["threads"] = skyconv.get_num_threads()
        return d


class SkyconvGpu(Skyconv):
    """skyconv on the GPU, called from NumPy: wall clock plus ``last_profile()`` per step.

    Every step must be exactly one skyconv GPU call (``last_profile`` reports the last call
    only, so a step that makes no GPU call would count the previous one twice).
    """

    engine = "gpu"

    def unavailable(self) -> str | None:
        why = super().unavailable()
        if why:
            return why
        import skyconv

        cuda = skyconv.backend_info()["cuda"]
        return None if cuda["available"] else f"skyconv has no GPU: {cuda['reason']}"

    def _call(self, inputs: tuple) -> tuple[Any, dict[str, float]]:
        import skyconv

        stages: dict[str, float] = {}

        def collect() -> None:
            for k, v in skyconv.last_profile().items():
                stages[k] = stages.get(k, 0.0) + float(v)

        t0 = time.perf_counter()
        out = run_steps(self.steps, inputs, after_step=collect)
        e2e = (time.perf_counter() - t0) * 1e3
        sample = {"e2e": e2e}
        if stages:
            sample["device"] = sum(v for k, v in stages.items() if k not in TRANSFER_STAGES)
            sample.update(stages)
        return out, sample


class Cupy(Impl):
    """A cupy implementation: steps take and return cupy arrays.

    Timed twice: ``device`` with CUDA events on inputs already on the GPU, and ``e2e`` from
    NumPy (``cupy.asarray`` of every input, the steps, ``cupy.asnumpy`` of the output).
    """

    engine = "gpu"

    def __init__(self, label: str, steps, **kw):
        kw.setdefault("requires", ("cupy",))
        super().__init__(label, steps, **kw)

    def unavailable(self) -> str | None:
        why = super().unavailable()
        if why:
            return why
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() < 1:
                return "cupy sees no GPU"
        except Exception as e:  # noqa: BLE001 - any failure means "cannot run here"
            return f"cupy cannot use a GPU: {type(e).__name__}: {e}"
        return None

    def measure(self, inputs: tuple, settings: Settings) -> tuple[Any, dict[str, Any]]:
        import cupy

        def to_dev(x):
            return cupy.asarray(x) if isinstance(x, np.ndarray) else x

        def to_host(x):
            return cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else x

        def e2e_call():
            t0 = time.perf_counter()
            out = tree_map(to_host, run_steps(self.steps, tree_map(to_dev, inputs)))
            return out, {"e2e": (time.perf_counter() - t0) * 1e3}

        try:
            dev = self._device_samples(tree_map(to_dev, inputs), settings)
            out, e2e = timed_loop(e2e_call, settings)
        finally:
            cupy.get_default_memory_pool().free_all_blocks()
        return out, self._record({**e2e, **dev})

    def _device_samples(self, d_inputs: tuple, settings: Settings) -> dict[str, list[float]]:
        """CUDA-event times of the steps on device-resident inputs."""
        import cupy

        start, stop = cupy.cuda.Event(), cupy.cuda.Event()

        def device_call():
            start.record()
            run_steps(self.steps, d_inputs)
            stop.record()
            stop.synchronize()
            return None, {"device": cupy.cuda.get_elapsed_time(start, stop)}

        return timed_loop(device_call, settings)[1]


# --------------------------------------------------------------------------- cases


@dataclass
class Comparison:
    """skyconv against an anchor on one engine ("cpu" or "gpu")."""

    engine: str
    skyconv: Impl
    anchor: Impl | None = None


@dataclass
class Case:
    """One benchmark: see the module docstring.

    ``inputs(ctx)`` returns the arrays (a tuple, or one array) every implementation gets;
    ``work(inputs)`` the :class:`Work` for the floors; ``params`` is recorded as is.
    ``reference(inputs)``, when given, is the exact answer: each comparison then also records
    ``rel_err_ref`` for skyconv and ``anchor_rel_err_ref`` for the anchor (for cases where the
    anchor is itself approximate, so that skyconv vs anchor mixes the two errors).
    """

    name: str
    description: str
    inputs: Callable[[Context], Any]
    work: Callable[[tuple], Work]
    comparisons: list[Comparison]
    params: dict[str, Any] = field(default_factory=dict)
    reference: Callable[[tuple], Any] | None = None

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


REGISTRY: dict[str, Case] = {}


def register(case: Case) -> Case:
    """Add ``case`` to the registry (names must be unique, "family.name")."""
    if case.name in REGISTRY:
        raise ValueError(f"duplicate benchmark case {case.name!r}")
    REGISTRY[case.name] = case
    return case


def measure_impl(impl: Impl | None, inputs: tuple, settings: Settings):
    """(output or None, record): ``skipped`` with a reason, ``error`` with the traceback tail,
    or ``ok`` with the timings. Never raises."""
    if impl is None:
        return None, {"status": "skipped", "reason": "no anchor for this engine"}
    rec = impl.describe()
    why = impl.unavailable()
    if why:
        rec.update(status="skipped", reason=why)
        return None, rec
    try:
        out, m = impl.measure(inputs, settings)
    except Exception as e:  # noqa: BLE001 - a failing implementation must not stop the run
        rec.update(
            status="error",
            reason=f"{type(e).__name__}: {e}",
            traceback=traceback.format_exc(limit=6)[-2000:],
        )
        return None, rec
    rec.update(m)
    return out, rec


def finite_positive(x: Any) -> bool:
    """True for a finite number > 0."""
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0
