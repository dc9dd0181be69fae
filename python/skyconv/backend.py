"""Threads, devices and backend information: the public path of :mod:`skyconv._backend`."""

from ._backend import *  # noqa: F403
from ._backend import __all__  # noqa: F401
