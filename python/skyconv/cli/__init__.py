"""The ``skyconv`` command line: one module per verb, one I/O module, one set of shared
options (see ``main``)."""

from .main import build_parser, main, run_verb

__all__ = ["build_parser", "main", "run_verb"]
