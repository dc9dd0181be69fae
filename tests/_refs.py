"""Reference helpers shared by the tests (import as `from _refs import rel_err`)."""

from __future__ import annotations

import argparse

import numpy as np


def rel_err(got, ref) -> float:
    """max |got - ref| / max |ref| (NaNs must match exactly)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN positions differ"
    g, r = np.nan_to_num(got), np.nan_to_num(ref)
    scale = np.max(np.abs(r)) if r.size else 0.0
    diff = float(np.max(np.abs(g - r), initial=0))
    return diff / scale if scale > 0 else diff


def rel_l2(got, ref) -> float:
    """||got - ref|| / ||ref|| (2-norm over all elements; shapes must match)."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def run_cli(module, argv):
    """Run one CLI subcommand as `skyconv ARGV...` would: `module` is its skyconv._cli_*
    module (its add_parser), argv starts with the subcommand's name."""
    parser = argparse.ArgumentParser(prog="skyconv")
    module.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
