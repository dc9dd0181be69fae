"""Kept for the Rust core (src/py/errors.rs looks the classes up here by name) and for old
imports: the exception tree lives in :mod:`skyconv.exceptions`."""

from .exceptions import (
    CudaError,
    DeviceError,
    GpuMemoryError,
    InternalError,
    ShapeError,
    SkyconvError,
)

__all__ = [
    "SkyconvError",
    "DeviceError",
    "ShapeError",
    "CudaError",
    "GpuMemoryError",
    "InternalError",
]
