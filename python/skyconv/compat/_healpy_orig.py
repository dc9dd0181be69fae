"""Access to the installed healpy, for the names compat.healpy hands over.

The first call imports healpy and records its functions before anyone can replace them (the
suite test patches healpy with compat.healpy's functions; a hand-over must still reach healpy's
own). ``original(name)`` returns healpy's attribute or raises AttributeError naming the function
and ``pip install healpy``.
"""

from __future__ import annotations

_ORIGINALS: dict = {}
_STATE: dict = {"tried": False, "module": None, "error": None}


def module():
    """The healpy module, or None when it cannot be imported."""
    if not _STATE["tried"]:
        _STATE["tried"] = True
        try:
            import healpy
        except ImportError as exc:  # healpy is optional
            _STATE["error"] = exc
        else:
            _STATE["module"] = healpy
            _ORIGINALS.update(vars(healpy))
    return _STATE["module"]


def original(name: str):
    """healpy's own ``name`` (as it was before any patching), or AttributeError."""
    hp = module()
    if hp is None:
        raise AttributeError(
            f"skyconv.compat.healpy has no {name!r}: skyconv does not implement it and hands it "
            f"to healpy, which is not installed (pip install healpy)"
        )
    try:
        return _ORIGINALS[name]
    except KeyError:
        raise AttributeError(f"module 'healpy' has no attribute {name!r}") from None
