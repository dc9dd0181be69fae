"""Drop-in layers that mirror other tools' APIs (healpy, Cygrid, SoFiA)."""
