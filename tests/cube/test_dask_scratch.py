"""The out-of-core scratch directory: removed by its owner (when dropped or on cleanup), never
by the copies that tasks carry to workers (pickled)."""

from __future__ import annotations

import gc
import os
import pickle

import numpy as np
import pytest

pytest.importorskip("zarr")

from skyconv._dask.scratch import Scratch  # noqa: E402


def test_owner_removes_copies_do_not(tmp_path):
    sc = Scratch(str(tmp_path), prefix="t-")
    z = sc.array("a", (4, 6), (2, 3), np.float32)
    z[...] = np.arange(24, dtype=np.float32).reshape(4, 6)
    path = sc.path
    copy = pickle.loads(pickle.dumps(sc))
    assert copy.path == path
    copy.cleanup()
    del copy
    gc.collect()
    assert os.path.isdir(os.path.join(path, "a"))  # a worker's copy never deletes
    sc.remove("a")
    assert not os.path.exists(os.path.join(path, "a"))
    del sc, z
    gc.collect()
    assert not os.path.exists(path)  # the owner, once dropped
