"""Reading SoFiA-2 parameter files for ``skyconv scfind --par``.

A SoFiA-2 parameter file has one ``key = value`` per line (``#`` starts a comment; blank
lines are skipped). skyconv uses the keys its Smooth + Clip step needs:

- ``input.data`` (the cube), ``input.region`` (x_min, x_max, y_min, y_max, z_min, z_max: a
  sub-cube in 0-based, inclusive pixels), ``input.invert`` (multiply the cube by −1);
- ``scfind.enable``, ``scfind.kernelsXY``, ``scfind.kernelsZ``, ``scfind.threshold``,
  ``scfind.replacement``, ``scfind.statistic``, ``scfind.fluxRange``;
- ``flag.region`` (groups of six 0-based inclusive pixel bounds, blanked before the finder);
- ``output.directory``, ``output.filename``, ``output.writeRawMask``, ``output.overwrite``.

Every other key is accepted; those set to something other than an empty value or ``false``
are listed in :attr:`SofiaPar.ignored`, and the ones that change what S+C sees
(preconditioning, ``flag.cube``, ``flag.catalog``, ``flag.auto``) are also listed in
:attr:`SofiaPar.warnings`, because skyconv's mask then differs from SoFiA-2's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..exceptions import ArgumentError

#: SoFiA-2 2.5.1's defaults for the keys skyconv reads (its ``default_parameters.par``).
DEFAULTS = {
    "input.data": "",
    "input.region": "",
    "input.invert": "false",
    "flag.region": "",
    "scfind.enable": "true",
    "scfind.kernelsXY": "0, 3, 6",
    "scfind.kernelsZ": "0, 3, 7, 15, 31",
    "scfind.threshold": "5.0",
    "scfind.replacement": "2.0",
    "scfind.statistic": "mad",
    "scfind.fluxRange": "negative",
    "output.directory": "",
    "output.filename": "",
    "output.writeRawMask": "false",
    "output.overwrite": "true",
}

#: Keys whose non-default setting changes the data S+C sees (the mask then differs).
_CHANGES_INPUT = (
    "flag.cube",
    "flag.catalog",
    "flag.auto",
    "contsub.enable",
    "scaleNoise.enable",
    "rippleFilter.enable",
    "input.noise",
    "input.weights",
    "input.gain",
    "input.mask",
)

_STATISTICS = ("mad", "std", "gauss")
_RANGES = ("negative", "full", "positive")


class ParError(ArgumentError):
    """A parameter file that cannot be used (with the file name and line)."""


@dataclass
class SofiaPar:
    """What ``skyconv scfind --par`` needs from a SoFiA-2 parameter file.

    Attributes
    ----------
    data : str
        Path of the input cube (``input.data``), as written in the file.
    region : tuple of 6 int or None
        ``input.region``: (x_min, x_max, y_min, y_max, z_min, z_max), 0-based, inclusive.
    invert : bool
        ``input.invert``.
    flag_regions : list of tuple of 6 int
        ``flag.region`` boxes (0-based, inclusive, in the full cube's pixels).
    enabled : bool
        ``scfind.enable``.
    kwargs : dict
        Keyword arguments for :func:`skyconv.smooth_and_clip` (``kernels_xy``,
        ``kernels_z``, ``threshold``, ``replacement``, ``statistic``, ``flux_range``).
    output_directory, output_filename : str
        Where the raw mask goes (defaults as SoFiA-2: the input's directory and its file name
        without ``.fits``).
    write_raw_mask, overwrite : bool
        ``output.writeRawMask`` and ``output.overwrite``.
    ignored : list of str
        Keys set in the file that skyconv does not use.
    warnings : list of str
        Settings that make skyconv's mask differ from SoFiA-2's.
    """

    data: str
    region: tuple | None
    invert: bool
    flag_regions: list
    enabled: bool
    kwargs: dict
    output_directory: str
    output_filename: str
    write_raw_mask: bool
    overwrite: bool
    ignored: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    @property
    def raw_mask_path(self) -> str:
        """``<output.directory>/<output.filename>_mask-raw.fits`` (SoFiA-2's name)."""
        return os.path.join(self.output_directory, self.output_filename + "_mask-raw.fits")


def _bool(key, v, where):
    s = v.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ParError(f"{where}: {key} must be true or false, got {v!r}")


def _numbers(key, v, where, kind=float):
    parts = [p for p in v.replace(",", " ").split() if p]
    try:
        return [kind(p) for p in parts]
    except ValueError:
        raise ParError(f"{where}: {key} must be a list of numbers, got {v!r}") from None


def _boxes(key, v, where):
    vals = _numbers(key, v, where, int)
    if len(vals) % 6:
        raise ParError(
            f"{where}: {key} needs groups of six values (x_min, x_max, y_min, y_max, z_min, "
            f"z_max), got {len(vals)}"
        )
    boxes = [tuple(vals[i : i + 6]) for i in range(0, len(vals), 6)]
    for b in boxes:
        if b[0] > b[1] or b[2] > b[3] or b[4] > b[5] or min(b) < 0:
            raise ParError(f"{where}: {key} has an empty or negative range {b}")
    return boxes


def parse_par(text: str, name: str = "<par>") -> SofiaPar:
    """Parse the text of a SoFiA-2 parameter file.

    Parameters
    ----------
    text : str
        The file's contents.
    name : str
        File name used in error messages.

    Returns
    -------
    SofiaPar

    Raises
    ------
    ParError
        A line without ``=``, a value of the wrong kind, or no ``input.data``.
    """
    given: dict[str, tuple[str, str]] = {}
    for i, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        if "=" not in s:
            raise ParError(f"{name}:{i}: expected 'key = value', got {line.strip()!r}")
        k, v = (p.strip() for p in s.split("=", 1))
        given[k] = (v, f"{name}:{i}")
    val = {k: (given[k][0] if k in given else d) for k, d in DEFAULTS.items()}

    def where(k):
        return given[k][1] if k in given else f"{name} (default)"

    data = val["input.data"]
    if not data:
        raise ParError(f"{name}: input.data is not set")
    region = None
    if val["input.region"].strip():
        boxes = _boxes("input.region", val["input.region"], where("input.region"))
        if len(boxes) != 1:
            raise ParError(f"{where('input.region')}: input.region takes one box of six values")
        region = boxes[0]
    flags = []
    if val["flag.region"].strip():
        flags = _boxes("flag.region", val["flag.region"], where("flag.region"))
    stat = val["scfind.statistic"].strip().lower()
    if stat not in _STATISTICS:
        raise ParError(
            f"{where('scfind.statistic')}: scfind.statistic must be one of {_STATISTICS}"
        )
    rng = val["scfind.fluxRange"].strip().lower()
    if rng not in _RANGES:
        raise ParError(f"{where('scfind.fluxRange')}: scfind.fluxRange must be one of {_RANGES}")
    kz = _numbers("scfind.kernelsZ", val["scfind.kernelsZ"], where("scfind.kernelsZ"))
    if any(z != int(z) for z in kz):
        raise ParError(f"{where('scfind.kernelsZ')}: scfind.kernelsZ must be whole numbers")
    kwargs = {
        "kernels_xy": _numbers(
            "scfind.kernelsXY", val["scfind.kernelsXY"], where("scfind.kernelsXY")
        ),
        "kernels_z": [int(z) for z in kz],
        "threshold": _numbers(
            "scfind.threshold", val["scfind.threshold"], where("scfind.threshold")
        )[0],
        "replacement": _numbers(
            "scfind.replacement", val["scfind.replacement"], where("scfind.replacement")
        )[0],
        "statistic": stat,
        "flux_range": rng,
    }
    out_dir = val["output.directory"] or os.path.dirname(data)
    out_name = val["output.filename"]
    if not out_name:
        base = os.path.basename(data)
        out_name = base[:-5] if base.lower().endswith(".fits") else base
    ignored = sorted(
        k
        for k, (v, _) in given.items()
        if k not in DEFAULTS and v.strip().lower() not in ("", "false")
    )
    warnings = [
        f"{k} = {given[k][0]} is not applied by skyconv: its mask will differ from SoFiA-2's"
        for k in ignored
        if k in _CHANGES_INPUT
    ]
    return SofiaPar(
        data=data,
        region=region,
        invert=_bool("input.invert", val["input.invert"], where("input.invert")),
        flag_regions=flags,
        enabled=_bool("scfind.enable", val["scfind.enable"], where("scfind.enable")),
        kwargs=kwargs,
        output_directory=out_dir,
        output_filename=out_name,
        write_raw_mask=_bool(
            "output.writeRawMask", val["output.writeRawMask"], where("output.writeRawMask")
        ),
        overwrite=_bool("output.overwrite", val["output.overwrite"], where("output.overwrite")),
        ignored=ignored,
        warnings=warnings,
    )


def read_par(path) -> SofiaPar:
    """Read and parse the SoFiA-2 parameter file at ``path`` (see :func:`parse_par`)."""
    with open(path, encoding="utf-8") as f:
        return parse_par(f.read(), str(path))


__all__ = ["DEFAULTS", "ParError", "SofiaPar", "parse_par", "read_par"]
