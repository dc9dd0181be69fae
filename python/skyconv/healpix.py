"""HEALPix geometry (RING and NEST), identical to healpy's pixelisation."""
