"""pytest plugin: substitute skyconv.compat.healpy's functions into healpy.

Loaded with ``-p _healpy_suite_plugin`` by tests/compat/test_healpy_suite.py when it runs
healpy's own test suite. Every name compat.healpy computes itself replaces healpy's, in healpy
and in each of healpy's submodules that holds the same object (so healpy's own functions that
call, say, ``map2alm`` inside ``sphtfunc`` call skyconv's too). compat.healpy records healpy's
originals first, so its hand-overs (``pixwin``, pixel weights, other spins, ...) still reach
healpy.
"""

from __future__ import annotations

import os
import sys

import healpy

from skyconv.compat import _healpy_orig
from skyconv.compat import healpy as compat

# Names compat.healpy provides that healpy also has (ring_weights is skyconv's own).
SUBSTITUTED = sorted(n for n in compat.__all__ if hasattr(healpy, n) and n != "UNSEEN")


def _substitute() -> int:
    _healpy_orig.module()  # record healpy's originals before replacing them
    count = 0
    for name in SUBSTITUTED:
        orig, new = getattr(healpy, name), getattr(compat, name)
        for modname, mod in list(sys.modules.items()):
            if mod is None or not (modname == "healpy" or modname.startswith("healpy.")):
                continue
            for attr, val in list(vars(mod).items()):
                if val is orig:
                    setattr(mod, attr, new)
                    count += 1
    return count


def pytest_configure(config):
    config._skyconv_substituted = _substitute()
    report = os.environ.get("SKYCONV_SUITE_REPORT")
    if report:
        with open(report, "w") as f:
            f.write("\n".join(SUBSTITUTED) + "\n")


def pytest_report_header(config):
    return (
        f"skyconv.compat.healpy substituted into healpy {healpy.__version__}: "
        f"{len(SUBSTITUTED)} names ({getattr(config, '_skyconv_substituted', 0)} bindings): "
        + ", ".join(SUBSTITUTED)
    )
