"""skyconv's exception tree, raised by the Rust core (src/py/errors.rs, which finds the classes
through ``skyconv._errors``) and by the Python layer."""


class SkyconvError(Exception):
    """Base class of every exception skyconv raises on its own account."""


class DeviceError(SkyconvError):
    """The requested device cannot be used (no driver, no GPU, NVRTC missing, after fork, ...)."""


class ShapeError(SkyconvError, ValueError):
    """An array has the wrong shape or length."""


class ArgumentError(SkyconvError, ValueError):
    """An argument (or an environment variable) has a value skyconv does not accept; the
    message names it and the accepted values."""


class ArgumentTypeError(SkyconvError, TypeError):
    """An argument has a type skyconv does not accept; the message names it."""


class HostMemoryError(SkyconvError, MemoryError):
    """A host allocation that the arguments ask for would not fit (or failed); the message says
    what was asked for, how many bytes, and the limit."""


class CudaError(SkyconvError):
    """A CUDA call failed after the device was set up."""


class GpuMemoryError(CudaError, MemoryError):
    """The GPU ran out of memory."""


class InternalError(SkyconvError):
    """A bug in skyconv (an invariant broke or a Rust panic was caught). Please report it."""


__all__ = [
    "SkyconvError",
    "DeviceError",
    "ShapeError",
    "ArgumentError",
    "ArgumentTypeError",
    "HostMemoryError",
    "CudaError",
    "GpuMemoryError",
    "InternalError",
]
