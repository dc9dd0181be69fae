"""The one rule for optional Dask: recognising a dask array never imports dask."""

import subprocess
import sys

import numpy as np
import pytest

from skyconv._utils.lazy import DaskMissingError, dask_array, is_dask_array
from skyconv.exceptions import SkyconvError


def test_numpy_is_not_dask():
    assert not is_dask_array(np.zeros(3))
    assert not is_dask_array([1, 2])


def test_dask_array_is_recognised():
    da = pytest.importorskip("dask.array")
    assert is_dask_array(da.zeros(4, chunks=2))
    assert dask_array() is da


def test_import_skyconv_does_not_import_dask():
    code = "import sys, skyconv; print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_dask_error_is_both_kinds():
    assert issubclass(DaskMissingError, SkyconvError)
    assert issubclass(DaskMissingError, ImportError)
