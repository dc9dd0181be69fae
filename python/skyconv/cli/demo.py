"""``skyconv demo``: every family's functions on synthetic data, timed on each device asked
for and compared with the reference library (scipy, healpy, plain NumPy) where installed.

    skyconv demo [--device {auto,cpu,cuda}] [--threads N] [--out rows.json --overwrite]

The device rule is every verb's (``--device``, else ``$SKYCONV_DEVICE``, else ``auto``); the
demo runs on the CPU, and also on the GPU when the rule gives the GPU (``auto`` with a working
GPU, or ``cuda``): the CPU rows are the reference the GPU rows are compared with. ``all`` is
accepted as the old name of ``auto``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from . import _io
from ._common import add_common, add_output, apply_threads, device_name, resolve_device


def _demo_device(text: str) -> str:
    """``--device`` of the demo: as every verb's, and ``all`` (the old name of ``auto``)."""
    name = str(text).strip().lower()
    return "auto" if name == "all" else device_name(name)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``demo`` verb to an argparse subparsers object.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers`` returned.

    Returns
    -------
    argparse.ArgumentParser
        The verb's parser; parsing sets ``command`` and ``func`` (:func:`run`).
    """
    p = subparsers.add_parser(
        "demo",
        help="run every function on synthetic data and compare with the reference libraries",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(
        p,
        device_type=_demo_device,
        device_help="auto: every usable device, cpu, or cuda (with the CPU as the reference); "
        "default: $SKYCONV_DEVICE, else auto",
    )
    add_output(p, "also write the rows as JSON to this file", required=False)
    p.set_defaults(func=run, command="demo")
    return p


def devices_for(where: str) -> list[str]:
    """The devices the demo runs on, for where the device rule puts the work (``"cpu"``,
    ``"cuda"`` or ``"cuda:N"``, from :func:`~skyconv.cli._common.resolve_device`): the CPU,
    and the GPU after it when the rule gives a GPU (the CPU rows are the GPU rows' reference)."""
    return ["cpu"] if where == "cpu" else ["cpu", where]


def run(args: argparse.Namespace) -> int:
    """Run the demos and print one line per (task, device); ``--out`` also writes the rows
    as JSON.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by the parser :func:`add_parser` made.

    Returns
    -------
    int
        0 (errors are raised; :func:`skyconv.cli.run_verb` turns them into an exit status).

    Raises
    ------
    OutputExistsError
        ``--out`` exists without ``--overwrite`` (exit status 2), before any work.
    """
    from .. import _demo

    _io.check_output(args.out, args.overwrite, data_file=False)
    apply_threads(args)
    _, where = resolve_device(args)
    rows = _demo.run(devices_for(where))
    if args.out is not None:
        with open(args.out, "w") as f:
            json.dump([dataclasses.asdict(r) for r in rows], f, indent=1)
    return 0
