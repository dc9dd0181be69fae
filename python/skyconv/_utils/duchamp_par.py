"""DUCHAMP 1.6.1 parameter files: the keys of the à trous reconstruction.

A DUCHAMP parameter file has one ``parameterName value`` pair per line. As DUCHAMP reads it:

- a line whose first character is ``#`` is a comment; blank lines are skipped; a last line
  without a newline is not read (DUCHAMP's read loop stops at the end of the file);
- the name is the first whitespace-separated word, compared case-insensitively
  (``snrRecon``, ``SNRRECON`` and ``snrrecon`` are the same key); a later line overrides an
  earlier one; unknown names are skipped silently (here: reported in ``ignored``);
- flags are true for ``1`` or ``true`` (any case) and false for anything else; integers and
  reals are read as C++ streams read them (the leading number; ``3.7`` is the integer 3, a
  value that is not a number reads as 0); reals are single precision; file names are the rest
  of the line with the surrounding blanks removed, other strings the next word;
- after reading, DUCHAMP adjusts inconsistent values (with a warning, kept in ``warnings``): a
  negative ``reconConvergence`` is made positive, ``scaleMax`` below ``scaleMin`` is set to
  ``scaleMin``, a ``reconDim`` outside 1-3 becomes 1, and a negative ``snrRecon`` turns the
  reconstruction off.

The default output name of the reconstruction is DUCHAMP's:
``<imageFile without .fits>[.sub].RECON-<reconDim>-<filterCode>-<snrRecon>-<scaleMin>-<scaleMax>-
<reconConvergence>.fits`` (numbers written as a C++ stream writes them: ``4``, ``0.005``), and
``RESID`` likewise for the residual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..exceptions import ArgumentError

# The reconstruction's keys (lower case): the attribute each sets and how DUCHAMP reads it.
_KEYS = {
    "imagefile": ("image_file", "filename"),
    "flagsubsection": ("flag_subsection", "flag"),
    "subsection": ("subsection", "word"),
    "flagatrous": ("flag_atrous", "flag"),
    "recondim": ("recon_dim", "int"),
    "scalemin": ("scale_min", "int"),
    "scalemax": ("scale_max", "int"),
    "snrrecon": ("snr_recon", "real"),
    "reconconvergence": ("recon_convergence", "real"),
    "filtercode": ("filter_code", "int"),
    "flagrobuststats": ("flag_robust_stats", "flag"),
    "flagoutputrecon": ("flag_output_recon", "flag"),
    "fileoutputrecon": ("file_output_recon", "filename"),
    "flagoutputresid": ("flag_output_resid", "flag"),
    "fileoutputresid": ("file_output_resid", "filename"),
    "verbose": ("verbose", "flag"),
}
_FILTERS = {1: "b3spline", 2: "triangle", 3: "haar"}
#: DUCHAMP's BLANK value for NaN pixels of a FITS file without a BLANK keyword.
DUCHAMP_BLANK = -8.00061
_INT = re.compile(r"[+-]?\d+")
_REAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf(?:inity)?|nan)", re.I)


def _flag(value: str) -> bool:
    return value == "1" or value.lower() == "true"


def _int(value: str) -> int:
    m = _INT.match(value)
    return int(m.group()) if m else 0


def _real(value: str) -> float:
    m = _REAL.match(value)
    return float(np.float32(float(m.group()))) if m else 0.0


def _cpp_number(x: float) -> str:
    """A number as a default C++ output stream writes it (6 significant digits, %g style)."""
    return f"{x:g}"


@dataclass
class DuchampPar:
    """The reconstruction parameters of a DUCHAMP parameter file (DUCHAMP's defaults where the
    file does not set them). Attribute names are DUCHAMP's, in snake case."""

    image_file: str = ""
    flag_subsection: bool = False
    subsection: str = "[*,*,*]"
    flag_atrous: bool = False
    recon_dim: int = 1
    scale_min: int = 1
    scale_max: int = 0
    snr_recon: float = 4.0
    recon_convergence: float = 0.005
    filter_code: int = 1
    flag_robust_stats: bool = True
    flag_output_recon: bool = False
    file_output_recon: str = ""
    flag_output_resid: bool = False
    file_output_resid: str = ""
    verbose: bool = True
    #: Keys present in the file that the reconstruction does not use: {name as written: value}.
    ignored: dict[str, str] = field(default_factory=dict)
    #: DUCHAMP's adjustments of inconsistent values, as messages.
    warnings: list[str] = field(default_factory=list)

    @property
    def filter(self) -> str:
        """skyconv's name of ``filterCode`` (1 b3spline, 2 triangle, 3 haar)."""
        return _FILTERS[self.filter_code]

    def atrous_kwargs(self) -> dict:
        """Keyword arguments of :func:`skyconv.atrous_denoise` for these parameters."""
        return {
            "dim": self.recon_dim,
            "snr_recon": self.snr_recon,
            "scale_min": self.scale_min,
            "scale_max": self.scale_max,
            "filter": self.filter,
            "convergence": self.recon_convergence,
            "robust": self.flag_robust_stats,
        }

    def _default_name(self, kind: str) -> str:
        stem = self.image_file[:-5] if self.image_file.endswith(".fits") else self.image_file
        sub = ".sub" if self.flag_subsection else ""
        nums = "-".join(
            [
                str(self.recon_dim),
                str(self.filter_code),
                _cpp_number(self.snr_recon),
                str(self.scale_min),
                str(self.scale_max),
                _cpp_number(self.recon_convergence),
            ]
        )
        return f"{stem}{sub}.{kind}-{nums}.fits"

    def check_reconstruction(self) -> None:
        """Raise ``ValueError`` when skyconv cannot run the reconstruction these parameters ask
        for: flagATrous is not true (DUCHAMP would not reconstruct), or flagSubsection is set
        (pixel subsections are not supported: cut the cube first)."""
        if not self.flag_atrous:
            raise ArgumentError("flagATrous is not true: DUCHAMP would not reconstruct")
        if self.flag_subsection:
            raise ArgumentError(
                f"flagSubsection is set ({self.subsection}): subsections are not supported "
                "(cut the cube first)"
            )

    def report(self) -> list[str]:
        """Messages for the user: DUCHAMP's adjustments, then the keys ignored."""
        lines = list(self.warnings)
        if self.ignored:
            lines.append("ignored (not used by the reconstruction): " + ", ".join(self.ignored))
        return lines

    def recon_file(self) -> str:
        """``fileOutputRecon``, or DUCHAMP's default name for the reconstruction."""
        return self.file_output_recon or self._default_name("RECON")

    def resid_file(self) -> str:
        """``fileOutputResid``, or DUCHAMP's default name for the residual."""
        return self.file_output_resid or self._default_name("RESID")


def parse_duchamp_par(text: str) -> DuchampPar:
    """Read the reconstruction keys from the text of a DUCHAMP parameter file.

    Parameters
    ----------
    text : str
        The file's contents.

    Returns
    -------
    DuchampPar
        The values (DUCHAMP's defaults for keys not given), the keys that were ignored, and
        DUCHAMP's adjustments of inconsistent values.

    Raises
    ------
    ValueError
        ``filterCode`` is not 1, 2 or 3 (DUCHAMP has no other filter).
    """
    par = DuchampPar()
    lines = text.split("\n")
    # DUCHAMP reads with `while (!getline(...).eof())`: a last line without a newline is lost.
    if lines[-1].strip():
        par.warnings.append(
            f"the last line ({lines[-1].strip()!r}) does not end in a newline: DUCHAMP does "
            "not read it, so it is skipped"
        )
    lines = lines[:-1]
    for line in lines:
        line = line.rstrip("\r")
        if line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if not parts:
            continue
        name, rest = parts[0], (parts[1] if len(parts) > 1 else "")
        key = name.lower()
        if key not in _KEYS:
            par.ignored[name] = rest.strip()
            continue
        attr, kind = _KEYS[key]
        words = rest.split()
        word = words[0] if words else ""
        if kind == "filename":
            value = rest.strip()
        elif kind == "word":
            value = word
        elif kind == "flag":
            value = _flag(word)
        elif kind == "int":
            value = _int(word)
        else:
            value = _real(word)
        setattr(par, attr, value)
    _check(par)
    return par


def _check(par: DuchampPar) -> None:
    """DUCHAMP's adjustments of the reconstruction parameters (only when it is on)."""
    if not par.flag_atrous:
        return
    if par.recon_dim == 2 and any(k.lower() == "flaggedchannels" for k in par.ignored):
        par.warnings.append(
            "flaggedChannels is set: DUCHAMP's 2-D reconstruction copies those channels "
            "unreconstructed, skyconv reconstructs every channel"
        )
    if par.recon_convergence < 0:
        par.warnings.append(
            f"reconConvergence is negative ({par.recon_convergence:g}): using "
            f"{-par.recon_convergence:g}"
        )
        par.recon_convergence = -par.recon_convergence
    if par.filter_code not in _FILTERS:
        raise ArgumentError(f"filterCode must be 1, 2 or 3, got {par.filter_code}")
    if par.scale_max > 0 and par.scale_max < par.scale_min:
        par.warnings.append(
            f"scaleMax ({par.scale_max}) is less than scaleMin ({par.scale_min}): setting both "
            f"to {par.scale_min}"
        )
        par.scale_max = par.scale_min
    if par.recon_dim not in (1, 2, 3):
        par.warnings.append(f"reconDim {par.recon_dim} is not 1, 2 or 3: setting it to 1")
        par.recon_dim = 1
    if par.snr_recon < 0:
        par.warnings.append(
            f"snrRecon is negative ({par.snr_recon:g}): the reconstruction is turned off"
        )
        par.flag_atrous = False


def header_blank_value(header) -> float:
    """The value DUCHAMP holds in blank pixels of an image with this FITS header: BLANK ×
    BSCALE + BZERO, or DUCHAMP's default -8.00061 (NaNs of a file without a BLANK keyword).

    Parameters
    ----------
    header : mapping
        The FITS header (``astropy.io.fits.Header`` or a dict).

    Returns
    -------
    float
        The blank value, in the data's (scaled) units.
    """
    if "BLANK" not in header:
        return DUCHAMP_BLANK
    bscale = float(header.get("BSCALE", 1.0))
    return float(header["BLANK"]) * bscale + float(header.get("BZERO", 0.0))


def read_duchamp_par(path) -> DuchampPar:
    """Read the reconstruction keys of the DUCHAMP parameter file at ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The parameter file.

    Returns
    -------
    DuchampPar
        See :func:`parse_duchamp_par`.

    Raises
    ------
    OSError
        The file cannot be read.
    ValueError
        As :func:`parse_duchamp_par`.
    """
    return parse_duchamp_par(Path(path).read_text(encoding="utf-8", errors="replace"))


__all__ = [
    "DUCHAMP_BLANK",
    "DuchampPar",
    "header_blank_value",
    "parse_duchamp_par",
    "read_duchamp_par",
]
