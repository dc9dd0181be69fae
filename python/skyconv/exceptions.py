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


class StateError(SkyconvError, RuntimeError):
    """A call that cannot go on in the current state: a method called out of order (a result
    asked for before any work was given) or options that exclude each other where the library
    skyconv stands in for raises RuntimeError."""


class UnsupportedError(SkyconvError, NotImplementedError):
    """An option of a library skyconv stands in for that skyconv does not implement (or hands
    to the library, which is not installed); the message says which."""


class MissingKeyError(SkyconvError, KeyError):
    """A header or mapping lacks a key the arguments need; the message names it."""


class CudaError(SkyconvError):
    """A CUDA call failed after the device was set up."""


class GpuMemoryError(CudaError, MemoryError):
    """The GPU ran out of memory."""


class SkyconvWarning(UserWarning):
    """skyconv did something other than asked, and says what (e.g. the ring method with a beam
    narrower than a pixel falls back to the harmonic method)."""


class InternalError(SkyconvError):
    """A bug in skyconv (an invariant broke or a Rust panic was caught). Please report it."""


__all__ = [
    "SkyconvError",
    "DeviceError",
    "ShapeError",
    "ArgumentError",
    "ArgumentTypeError",
    "HostMemoryError",
    "StateError",
    "UnsupportedError",
    "MissingKeyError",
    "CudaError",
    "GpuMemoryError",
    "InternalError",
    "SkyconvWarning",
]
