"""``skyconv info``: backend information (version, CPU threads, GPU, CUDA versions) as JSON.

skyconv info [--out info.json --overwrite]
"""

from __future__ import annotations

import argparse
import json

from . import _io
from ._common import add_output


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``info`` verb to an argparse subparsers object.

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
        "info", help="print backend information (CPU threads, GPU, CUDA versions) as JSON"
    )
    add_output(p, "write the JSON to this file instead of stdout", required=False)
    p.set_defaults(func=run, command="info")
    return p


def run(args: argparse.Namespace) -> int:
    """Print (or write to ``--out``) ``skyconv.backend_info()`` as JSON.

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
    import skyconv

    _io.check_output(args.out, args.overwrite, data_file=False)
    text = json.dumps(skyconv.backend_info(), indent=2)
    if args.out is None:
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0
