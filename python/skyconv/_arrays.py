"""Old path of :mod:`skyconv._utils.arrays` (kept for modules not moved yet)."""

from ._utils.arrays import float_array, int_arg, normalize_axis

__all__ = ["float_array", "int_arg", "normalize_axis"]
