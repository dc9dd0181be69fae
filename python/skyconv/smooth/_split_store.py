"""Kernel splits kept on disk, so that a fresh process's first ``smooth_map(method="auto" or
"split")`` does not fit them again (the fit is ~50 small SVDs and a Legendre table: 0.5-1 s,
most of that call's first-call cost; see issue 18). ``method="auto"``'s measured errors
against the exact smoothing (:func:`skyconv.smooth.auto.grid_errors`, 0.1-0.5 s, narrow
beams only) and the ring method's predicted error (``auto._ring_error``, ~1 s at nside 2048:
a Legendre transform of the profile and the pixel-grid matrix) are kept beside them as small
JSON files.

One ``.npz`` file per split in ``<cache folder>/smooth_splits/`` (the cache folder of
:func:`skyconv.smooth.cost.cache_path`), named by a SHA-256 of everything the fit depends on:
the window's bytes, nside, lmax, tol, iter, the device placement, the cost model's measured
constants for those devices (re-measuring them gives new names) and this module's schema. A
file is written to a temporary name and renamed (concurrent processes never read half a file);
an unreadable or mismatching file is ignored and the split fitted again. ``clear_cache`` of
:mod:`skyconv.smooth.cost` removes the folder with the constants. ``SKYCONV_RECALIBRATE=1``
neither reads nor writes it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import threading
import zipfile
from pathlib import Path

import numpy as np

from .._utils.args import env_flag
from . import cost as _cost
from ._fit import Basis

SCHEMA = 1
FOLDER = "smooth_splits"
_ARRAYS = ("harmonic_window", "theta", "profile")
_SCALARS = (
    "nside",
    "lmax",
    "tol",
    "lcut",
    "theta_cut",
    "predicted_error",
    "fit_error",
    "disc_error",
    "alias_error",
    "time_harmonic",
    "time_ring",
    "predicted_time",
    "time_full_harmonic",
    "lmax_eff",
)


def folder() -> Path:
    """Where the splits are kept."""
    return _cost.cache_path().parent / FOLDER


def enabled() -> bool:
    """False under ``SKYCONV_RECALIBRATE`` (every process measures and fits afresh; the one
    reading of that variable, :func:`skyconv._utils.args.env_flag`)."""
    return not env_flag("SKYCONV_RECALIBRATE")


def key(window: np.ndarray, nside: int, lmax: int, tol: float, iter: int, device) -> str:
    """The file name's hash for a split of ``window`` (float64, lmax + 1 values)."""
    h = hashlib.sha256()
    model = _cost.model(device)
    parts = {
        "schema": SCHEMA,
        "problem": [int(nside), int(lmax), float(tol).hex(), int(iter)],
        "placement": list(_cost.placement_key(device)),
        "constants": [
            [d.device, [float(c).hex() for c in d.harmonic], None]
            if d.ring is None
            else [d.device, [float(c).hex() for c in d.harmonic], [float(c).hex() for c in d.ring]]
            for d in model.devices
        ],
    }
    h.update(json.dumps(parts, sort_keys=True).encode())
    h.update(np.ascontiguousarray(window, dtype=np.float64).tobytes())
    return h.hexdigest()


def load(name: str, split_type):
    """The split stored under ``name`` as a ``split_type`` (KernelSplit), or None."""
    path = folder() / f"{name}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("schema") != SCHEMA or meta.get("key") != name:
                return None
            arrays = {k: np.array(z[k]) for k in _ARRAYS}
            coef = np.array(z["coef"]) if meta["basis"] is not None else None
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        return None
    basis = None if meta["basis"] is None else Basis(*meta["basis"])
    return split_type(
        **{k: meta[k] for k in _SCALARS},
        **arrays,
        devices=tuple(meta["devices"]),
        candidates=tuple(meta["candidates"]),
        _basis=basis,
        _coef=coef,
    )


def store(name: str, ks) -> None:
    """Keep ``ks`` under ``name``; a folder that cannot be written only costs a fit later."""
    basis = ks._basis
    meta = {k: getattr(ks, k) for k in _SCALARS}
    meta.update(
        schema=SCHEMA,
        key=name,
        devices=list(ks.devices),
        candidates=[dict(c) for c in ks.candidates],
        basis=None if basis is None else [basis.theta_cut, basis.n, basis.p],
    )
    arrays = {k: np.asarray(getattr(ks, k), dtype=np.float64) for k in _ARRAYS}
    coef = np.zeros(0) if ks._coef is None else np.asarray(ks._coef, dtype=np.float64)
    try:
        d = folder()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{name}.{_unique()}.tmp.npz"
        np.savez(tmp, meta=np.array(json.dumps(meta)), coef=coef, **arrays)
        tmp.replace(d / f"{name}.npz")
    except OSError:
        pass


def grid_key(window, nside: int, lmax: int, tol: float, iter: int, fwhm) -> str:
    """The file name's hash for ``grid_errors`` of this problem (computed on the CPU engine,
    so no device in the key; skyconv's version is)."""
    from .. import _core

    parts = {
        "schema": SCHEMA,
        "grid": [int(nside), int(lmax), float(tol).hex(), int(iter)],
        "fwhm": None if fwhm is None else float(fwhm).hex(),
        "version": _core.__version__,
    }
    h = hashlib.sha256(json.dumps(parts, sort_keys=True).encode())
    h.update(np.ascontiguousarray(window, dtype=np.float64)[: lmax + 1].tobytes())
    return "grid-" + h.hexdigest()


def ring_key(window, nside: int, lmax: int, tol: float, fwhm) -> str:
    """The file name's hash for the ring method's predicted error on this problem
    (``auto._ring_error``: a function of the beam, nside and tol alone; skyconv's version is in
    the key, as the profile and the error model are skyconv's)."""
    from .. import _core

    parts = {
        "schema": SCHEMA,
        "ring": [int(nside), int(lmax), float(tol).hex()],
        "fwhm": None if fwhm is None else float(fwhm).hex(),
        "version": _core.__version__,
    }
    h = hashlib.sha256(json.dumps(parts, sort_keys=True).encode())
    h.update(np.ascontiguousarray(window, dtype=np.float64)[: lmax + 1].tobytes())
    return "ring-" + h.hexdigest()


def load_json(name: str) -> dict | None:
    """The dict stored under ``name`` by :func:`store_json`, or None."""
    try:
        doc = json.loads((folder() / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("key") != name:
        return None
    return doc.get("value")


def store_json(name: str, value: dict) -> None:
    """Keep a JSON-able dict under ``name`` (temporary file + rename)."""
    try:
        d = folder()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{name}.{_unique()}.tmp"
        tmp.write_text(json.dumps({"schema": SCHEMA, "key": name, "value": value}))
        tmp.replace(d / f"{name}.json")
    except OSError:
        pass


def _unique() -> str:
    """A temporary name part no other writer (process or thread) uses at the same time."""
    return f"{os.getpid()}.{threading.get_ident()}.{next(_SEQ)}"


_SEQ = itertools.count()


def clear() -> None:
    """Remove every stored split."""
    shutil.rmtree(folder(), ignore_errors=True)
