"""The Dask paths of the public functions, one file per family (``filters``, ``cube``,
``grid``, ``sht``; ``halo`` for chunk overlaps). A public function hands a dask input here in
one line; nothing here is imported unless a dask array arrives (``skyconv._utils.lazy``)."""
