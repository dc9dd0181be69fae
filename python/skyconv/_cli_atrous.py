"""Deprecated alias of :mod:`skyconv.cli.atrous`, kept for code that imported it.

``run(args)`` returns the exit status (2 for a bad argument, 1 for a failure), as it did.
"""

from __future__ import annotations

from .cli.atrous import add_parser
from .cli.main import run_verb as run

__all__ = ["add_parser", "run"]
