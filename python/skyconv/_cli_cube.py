"""Deprecated alias of :mod:`skyconv.cli.scfind`, kept for code that imported it."""

from __future__ import annotations

from .cli.scfind import add_parser as add_scfind_parser
from .cli.scfind import run as run_scfind

__all__ = ["add_scfind_parser", "run_scfind"]
