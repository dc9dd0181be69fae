"""The ``skyconv`` console script: the top-level parser, the verbs and the one error handler.

Every verb is a module of this package with ``add_parser(subparsers)`` (which sets
``command`` and ``func=run`` on its parser; ``_common.verb_parser`` makes it) and
``run(args) -> int``. ``main`` parses, runs the verb and turns any exception into one message
on stderr and an exit status (see ``_errors``: 2 for a wrong command line, 1 for a failure
while running).

The verb contract: ``run`` returns 0 and raises every error. Before any work
(``_common.before_work``): ``OutputExistsError`` or ``UsageError`` (exit status 2) for an
output that exists without ``--overwrite``, a missing input, an input given as an output or a
command line that asks for something impossible, and ``skyconv.DeviceError`` (1) for
``--device cuda`` without a working GPU. While running: ``InputFileError`` (1) for an input
that cannot be read as the verb needs.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import _errors, alm2map, atrous, demo, grid, info, map2alm, scfind, smooth

#: The verb modules, in the order ``skyconv --help`` lists them.
VERBS = (info, demo, alm2map, map2alm, smooth, grid, scfind, atrous)


def build_parser() -> argparse.ArgumentParser:
    """The ``skyconv`` parser with every verb.

    Returns
    -------
    argparse.ArgumentParser
        Parsing sets ``command`` (the verb's name) and ``func`` (its ``run``).
    """
    p = argparse.ArgumentParser(
        prog="skyconv",
        description="GPU and CPU sky convolution for astronomers. Every verb writes its result "
        "with --out PATH (checked before any work; --overwrite replaces) and computes on "
        "--device (default: $SKYCONV_DEVICE, else auto).",
        epilog="Exit status: 0 success, 2 a wrong command line (usage, bad values, an output "
        "that exists), 1 a failure while running, 130 interrupted.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="VERB")
    for verb in VERBS:
        verb.add_parser(sub)
    return p


def run_verb(args: argparse.Namespace) -> int:
    """Run the parsed verb ``args.func(args)``; the one error handler of the CLI.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed by :func:`build_parser` (or a parser a verb module's ``add_parser`` filled).

    Returns
    -------
    int
        The verb's exit status, or for an exception: 2 (wrong command line) or 1 (failure
        while running), after printing ``skyconv VERB: error: MESSAGE`` on stderr; 130 for
        Ctrl-C.
    """
    verb = getattr(args, "command", None) or "skyconv"
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # stdout closed early (`skyconv info | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"\nskyconv {verb}: interrupted", file=sys.stderr)
        return _errors.INTERRUPTED
    except BaseException as e:  # the one handler; a Rust panic is a BaseException
        if isinstance(e, (SystemExit, GeneratorExit)):
            raise
        status = _errors.exit_status(e)
        kind = "" if status == _errors.USAGE or _is_expected(e) else f" ({type(e).__name__})"
        print(f"skyconv {verb}: error{kind}: {e}", file=sys.stderr)
        return status


def _is_expected(e: BaseException) -> bool:
    from .. import SkyconvError

    return isinstance(e, (SkyconvError, OSError, MemoryError))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``skyconv`` and ``python -m skyconv``.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status (see :func:`run_verb`).

    Raises
    ------
    SystemExit
        From argparse: status 2 for a usage error, 0 for ``--help``.
    """
    args = build_parser().parse_args(argv)
    return run_verb(args)


__all__ = ["VERBS", "build_parser", "main", "run_verb"]
