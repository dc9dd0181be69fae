"""Kept for the Rust core (src/py/errors.rs looks the classes up here by name) and for old
imports: the exception tree lives in :mod:`skyconv.exceptions`."""

from .exceptions import *  # noqa: F403
from .exceptions import __all__  # noqa: F401
