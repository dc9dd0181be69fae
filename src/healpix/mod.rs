//! HEALPix geometry (RING and NEST).
