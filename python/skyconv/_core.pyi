"""Type stubs for the compiled extension ``skyconv._core`` (private; use the public modules)."""

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

# --- atrous (src/py/atrous.rs) ---------------------------------------------------------------
# data: C-contiguous native-endian float32/float64, 1-3 dimensions (skyconv.atrous checks).
# Returns (reconstruction, iterations, noise, input_noise, scales, device) with one entry per
# unit (spectrum for dim 1, map for dim 2, one for dim 3) in C order of the units' shape.
# progress(iteration, active_units, units, mean_noise, max_rel_change) after each iteration.
# gpu_mem_limit (bytes): assumed free GPU memory (tests of the CUDA engine's chunking).

def _atrous_denoise(
    data: npt.NDArray[np.floating],
    dim: int,
    snr_recon: float,
    scale_min: int,
    scale_max: int,
    filter: str,
    convergence: float,
    robust: bool,
    device: str | None = None,
    progress: Callable[[int, int, int, float, float], object] | None = None,
    gpu_mem_limit: int | None = None,
) -> tuple[npt.NDArray[np.floating], list[int], list[float], list[float], int, str]: ...
def _atrous_plan(shape: list[int], dim: int, filter: str) -> tuple[int, list[float]]: ...
