"""Temporary zarr stores for out-of-core Dask work: one directory per call, removed when the
last dask graph that reads from it is dropped (or at the client's exit).

The directory must be on storage every worker can read and write (local disk for a
LocalCluster; a shared file system such as Lustre or GPFS for a multi-node cluster).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref

import numpy as np


class Scratch:
    """A temporary directory of zarr arrays, owned by the process that made it.

    Passed as an argument into the tasks that read from it, so the dask graphs that use it
    keep it alive; the copies that tasks receive on workers (pickled) do not own the
    directory and never delete it.

    Parameters
    ----------
    parent : str or None
        Directory to create the temporary directory in (None: Dask's ``temporary-directory``
        setting, else the system's temporary directory).
    prefix : str
        Name prefix of the temporary directory.
    """

    def __init__(self, parent=None, prefix="skyconv-"):
        if parent is None:
            try:
                import dask

                parent = dask.config.get("temporary-directory", None)
            except ImportError:  # pragma: no cover - the Dask path always has dask
                parent = None
        if parent is not None:
            os.makedirs(parent, exist_ok=True)
        self.path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)

    def __getstate__(self):
        return {"path": self.path}

    def __setstate__(self, state):
        self.path = state["path"]
        self._finalizer = None  # a worker's copy: never deletes

    def __dask_tokenize__(self):
        return ("skyconv-scratch", self.path)

    def array(self, name, shape, chunks, dtype):
        """A new uncompressed zarr array ``name`` (zeros) in this directory.

        Parameters
        ----------
        name : str
            Sub-directory name.
        shape, chunks : tuple of int
            The array's shape and its zarr chunks.
        dtype : numpy dtype

        Returns
        -------
        zarr.Array
            Opened for writing.
        """
        import zarr

        path = os.path.join(self.path, name)
        kw = {"shape": tuple(shape), "chunks": tuple(chunks), "dtype": np.dtype(dtype)}
        if _zarr_major(zarr) >= 3:
            return zarr.create_array(path, compressors=None, fill_value=0, overwrite=True, **kw)
        return zarr.open_array(path, mode="w", compressor=None, fill_value=0, **kw)

    def remove(self, name):
        """Delete array ``name`` (its bytes on disk) now."""
        shutil.rmtree(os.path.join(self.path, name), ignore_errors=True)

    def cleanup(self):
        """Delete the whole directory now (the owner only)."""
        if self._finalizer is not None:
            self._finalizer()


def _zarr_major(zarr) -> int:
    return int(str(zarr.__version__).split(".")[0])


__all__ = ["Scratch"]
