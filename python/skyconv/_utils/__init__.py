"""Private helpers shared by the families: argument checks, the device rule, CUDA library
folders. Nothing here imports a family module."""
