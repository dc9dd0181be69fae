"""Old path of :mod:`skyconv.smooth.split` (kernel splitting), kept for users' imports."""

from .smooth.split import (
    ALPHA,
    PROFILE_NODES,
    TAIL,
    THETA_STEPS,
    KernelSplit,
    apply_split,
    cached_split,
    effective_lmax,
    kernel_reach,
    split_kernel,
)

__all__ = [
    "ALPHA",
    "PROFILE_NODES",
    "TAIL",
    "THETA_STEPS",
    "KernelSplit",
    "apply_split",
    "cached_split",
    "effective_lmax",
    "kernel_reach",
    "split_kernel",
]
