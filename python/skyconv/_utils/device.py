"""The one device rule: a ``device`` argument becomes a :class:`Device`, once per call.

``None`` means the ``SKYCONV_DEVICE`` environment variable, else ``"auto"``. Names (any case,
spaces around ignored): ``"cpu"``; ``"cuda"`` (or ``"gpu"``), the default GPU; ``"cuda:N"``,
GPU number N; ``"auto"``, the GPU when one works, else the CPU. A :class:`Device` passes
through unchanged, so the layers below take the object and never resolve again. The Rust core
gets the string form, ``str(device)``: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import _core
from ..exceptions import ArgumentError, ArgumentTypeError

#: The environment variable that sets the default device.
ENV = "SKYCONV_DEVICE"


@dataclass(frozen=True)
class Device:
    """A resolved device: where one call runs.

    Attributes
    ----------
    kind : str
        ``"cpu"`` or ``"cuda"``.
    index : int or None
        The GPU's number for ``"cuda:N"``; None for the CPU and for the default GPU.
    auto : bool
        Chosen by ``"auto"``: callers that can spread work over the GPU and the CPU (the split
        smoothing method) may do so.
    """

    kind: str
    index: int | None = None
    auto: bool = False

    def __str__(self) -> str:
        if self.kind == "cuda" and self.index is not None:
            return f"cuda:{self.index}"
        return self.kind

    @property
    def core(self) -> str:
        """The string the Rust core takes: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
        return str(self)

    @property
    def is_cuda(self) -> bool:
        """Whether this is a GPU."""
        return self.kind == "cuda"


CPU = Device("cpu")
_AUTO = {"cpu": Device("cpu", auto=True), "cuda": Device("cuda", auto=True)}
_CUDA = Device("cuda")

_NAMES = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def _gpu_index(name: str, where: str) -> int | None:
    """N of "cuda:N" (None for "cuda"/"gpu"), ValueError naming ``where`` otherwise."""
    kind, _, num = name.partition(":")
    if kind not in ("cuda", "gpu"):
        raise ArgumentError(f"{where} must be {_NAMES}, got {name!r}")
    if not _:
        return None
    if not num.isdigit():
        raise ArgumentError(f"{where} must be {_NAMES} with N a GPU number >= 0, got {name!r}")
    return int(num)


def resolve(device=None) -> Device:
    """The :class:`Device` for a ``device`` argument (see the module docstring).

    Raises
    ------
    skyconv.ArgumentTypeError
        ``device`` is not a str, a Device or None (a TypeError).
    skyconv.ArgumentError
        An unknown name (in the argument or in ``SKYCONV_DEVICE``, named in the message; a
        ValueError).
    skyconv.DeviceError
        ``"cuda"`` or ``"cuda:N"`` asked for and no GPU works.
    """
    if isinstance(device, Device):
        return device
    where = "device"
    if device is None:
        device = os.environ.get(ENV, "").strip() or "auto"
        where = f"environment variable {ENV} (the default device)"
    elif not isinstance(device, str):
        raise ArgumentTypeError(
            f"device must be a str like 'auto', 'cpu', 'cuda' or 'cuda:N', a Device or None, "
            f"got {type(device).__name__} {device!r}"
        )
    name = device.strip().lower()
    if name == "cpu":
        return CPU
    if name == "auto":
        return _AUTO[_core.resolve_device("auto")]
    index = _gpu_index(name, where)
    _core.resolve_device("cuda")  # DeviceError saying why no GPU works
    if index is None:
        return _CUDA
    _core.resolve_device(f"cuda:{index}")  # DeviceError when GPU N cannot be used
    return Device("cuda", index)


def deferred(device=None) -> str | None:
    """Check ``device``'s spelling without resolving it, for work that runs elsewhere (a Dask
    task resolves it on its worker, where ``"cuda"`` is the worker's GPU). Returns None for
    None (the worker's ``SKYCONV_DEVICE``, else "auto"), else the lower-case name.

    Raises
    ------
    TypeError
        ``device`` is not a str, a Device or None.
    ValueError
        An unknown name.
    """
    if device is None:
        return None
    if isinstance(device, Device):
        return str(device)
    if not isinstance(device, str):
        raise ArgumentTypeError(f"device must be a str or None, got {type(device).__name__}")
    name = device.strip().lower()
    if name not in ("cpu", "auto"):
        _gpu_index(name, "device")
    return name


def resolve_device(device=None) -> str:
    """``str(resolve(device))``: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
    return str(resolve(device))


__all__ = ["CPU", "Device", "deferred", "resolve", "resolve_device"]
