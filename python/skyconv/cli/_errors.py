"""The CLI's errors and the one rule that turns an exception into an exit status.

Exit status: 0 success; 2 the command line is wrong (argparse's usage errors, a bad option
value, an output that exists without ``--overwrite``, a missing input file, a value that skyconv
refuses with ``ValueError``/``TypeError``); 1 the work failed while running (an unreadable or
malformed input file, no usable GPU, out of memory, an I/O error); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

from .. import SkyconvError

USAGE = 2
RUNTIME = 1
INTERRUPTED = 130


class UsageError(SkyconvError, ValueError):
    """The command line asks for something that cannot be done (exit status 2)."""


class OutputExistsError(UsageError, FileExistsError):
    """An output file exists and ``--overwrite`` was not given (exit status 2).

    Also a ``FileExistsError`` (an ``OSError``), as the verbs raised before."""


class InputFileError(SkyconvError):
    """An input file exists but cannot be read as what the verb needs (exit status 1)."""


class MissingDependencyError(SkyconvError, ImportError):
    """An optional package (astropy, zarr) that the asked-for file format needs is missing
    (exit status 1)."""


def exit_status(exc: BaseException) -> int:
    """The exit status for an exception raised by a verb (see the module docs)."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, UsageError):
        return USAGE
    if isinstance(exc, (InputFileError, MissingDependencyError)):
        return RUNTIME
    if isinstance(exc, (ValueError, TypeError)):
        return USAGE
    return RUNTIME


__all__ = [
    "UsageError",
    "OutputExistsError",
    "InputFileError",
    "MissingDependencyError",
    "exit_status",
    "USAGE",
    "RUNTIME",
    "INTERRUPTED",
]
