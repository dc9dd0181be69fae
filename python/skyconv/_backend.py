"""Old path of :mod:`skyconv.backend` and the device rule (kept for modules not moved yet)."""

from ._utils.device import resolve_device
from .backend import backend_info, get_num_threads, last_profile, set_num_threads

__all__ = ["backend_info", "get_num_threads", "last_profile", "resolve_device", "set_num_threads"]
