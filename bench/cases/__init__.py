"""Benchmark families: each module here registers its cases when imported.

Adding a family is adding a module ``bench/cases/<family>.py`` that calls
:func:`bench.harness.register`; nothing else needs to change. Anchor libraries must be imported
inside the steps (or listed in ``requires``) so that a missing one skips its measurements
instead of breaking the import.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings

_loaded = False


def load_all() -> None:
    """Import every family module once (a module that fails to import is reported, skipped)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{__name__}.{mod.name}")
        except Exception as e:  # noqa: BLE001 - one broken family must not hide the others
            warnings.warn(f"benchmark family {mod.name!r} failed to import: {e!r}", stacklevel=2)
