"""Where to look for CUDA 13's shared libraries (libnvrtc, libcufft) installed by pip.

Only folder names are computed here; nothing is loaded until a GPU is first needed."""

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
        # CUDA 13 wheels put everything in nvidia/cu13/lib; older ones used one folder a library.
        for sub in ("cu13/lib", "cuda_nvrtc/lib", "cufft/lib"):
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
