"""Where to look for CUDA 12's or 13's shared libraries (libnvrtc, libcufft) installed by pip.

CUDA 13's wheels (``nvidia-cuda-nvrtc``, ``nvidia-cufft``: ``pip install 'skyconv[cuda13]'``)
put everything in ``nvidia/cu13/lib``; CUDA 12's (``nvidia-cuda-nvrtc-cu12``,
``nvidia-cufft-cu12``: ``pip install 'skyconv[cuda12]'``) use one folder a library,
``nvidia/cuda_nvrtc/lib`` and ``nvidia/cufft/lib``. The core adds conda, CUDA_HOME, CUDA_PATH,
/usr/local/cuda* and LD_LIBRARY_PATH, and picks the toolkit the driver can run
(``skyconv.backend_info()["cuda"]`` says which). Only folder names are computed here; nothing
is loaded until a GPU is first needed."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def search_dirs() -> list[str]:
    """Folders that may hold CUDA libraries, most specific first."""
    dirs: list[Path] = []
    extra = os.environ.get("SKYCONV_CUDA_LIB_DIRS")
    if extra:
        dirs.extend(Path(p) for p in extra.split(os.pathsep) if p)
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        # CUDA 13 wheels put everything in nvidia/cu13/lib; CUDA 12's use one folder a library.
        for sub in ("cu13/lib", "cu12/lib", "cuda_nvrtc/lib", "cufft/lib"):
            d = base / sub
            if d.is_dir():
                dirs.append(d)
    seen: set[str] = set()
    out = []
    for d in dirs:
        s = str(d)
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out
