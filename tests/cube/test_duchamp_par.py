"""DUCHAMP parameter files: the reconstruction keys (skyconv._utils.duchamp_par)."""

from __future__ import annotations

import numpy as np
import pytest

from skyconv._utils.duchamp_par import parse_duchamp_par, read_duchamp_par

PAR = """\
# A DUCHAMP parameter file
imageFile       /data/cube.fits
FLAGATROUS      true
reconDim        2
scalemin        2
ScaleMax        4
snrRecon        3.3
reconConvergence 0.01
filterCode      2
flagRobustStats 0
flagOutputRecon 1
snrCut          5
flagGrowth      TRUE
  # indented: not a comment for DUCHAMP, its name is '#'
"""


def test_reads_reconstruction_keys(tmp_path):
    path = tmp_path / "duchamp.par"
    path.write_text(PAR)
    p = read_duchamp_par(path)
    assert p.image_file == "/data/cube.fits"
    assert p.flag_atrous is True
    assert (p.recon_dim, p.scale_min, p.scale_max, p.filter_code) == (2, 2, 4, 2)
    # reals are single precision, as DUCHAMP's float parameters
    assert p.snr_recon == float(np.float32(3.3)) and p.snr_recon != 3.3
    assert p.recon_convergence == float(np.float32(0.01))
    assert p.flag_robust_stats is False and p.flag_output_recon is True
    assert p.ignored == {
        "snrCut": "5",
        "flagGrowth": "TRUE",
        "#": "indented: not a comment for DUCHAMP, its name is '#'",
    }
    assert p.warnings == []
    assert p.atrous_kwargs() == {
        "dim": 2,
        "snr_recon": p.snr_recon,
        "scale_min": 2,
        "scale_max": 4,
        "filter": "triangle",
        "convergence": p.recon_convergence,
        "robust": False,
    }
    assert p.recon_file() == "/data/cube.RECON-2-2-3.3-2-4-0.01.fits"
    assert p.resid_file() == "/data/cube.RESID-2-2-3.3-2-4-0.01.fits"


def test_defaults_and_file_names():
    p = parse_duchamp_par("imagefile  my cube.fits  \nflagATrous 1\nfileOutputResid r.fits\n")
    assert p.image_file == "my cube.fits"  # file names: the rest of the line, trimmed
    assert (p.recon_dim, p.scale_min, p.scale_max, p.filter) == (1, 1, 0, "b3spline")
    assert (p.snr_recon, p.recon_convergence, p.flag_robust_stats) == (4.0, 0.005, True)
    assert p.recon_file() == "my cube.RECON-1-1-4-1-0-0.005.fits"
    assert p.resid_file() == "r.fits"


def test_cpp_stream_numbers_and_flags():
    p = parse_duchamp_par(
        "flagatrous yes\nrecondim 3.7\nscalemax abc\nsnrrecon 2.5e0x\nverbose False\n"
    )
    assert p.flag_atrous is False  # only 1 and true are true
    assert p.recon_dim == 3 and p.scale_max == 0 and p.snr_recon == 2.5 and p.verbose is False


def test_last_key_wins_and_last_line_needs_newline():
    p = parse_duchamp_par("flagATrous 1\nsnrRecon 3\nsnrRecon 5\nreconDim 3")
    assert p.snr_recon == 5.0
    assert p.recon_dim == 1  # the unterminated last line is not read, as in DUCHAMP
    assert any("newline" in w for w in p.warnings)


def test_duchamp_adjustments():
    p = parse_duchamp_par(
        "flagATrous 1\nreconConvergence -0.02\nscaleMin 3\nscaleMax 2\nreconDim 4\n"
    )
    assert p.recon_convergence == float(np.float32(0.02))
    assert p.scale_max == 3 and p.recon_dim == 1
    assert len(p.warnings) == 3
    p = parse_duchamp_par("flagATrous 1\nsnrRecon -1\n")
    assert p.flag_atrous is False and p.warnings
    # with the reconstruction off, DUCHAMP leaves the values alone
    p = parse_duchamp_par("reconDim 7\n")
    assert p.recon_dim == 7 and p.warnings == []


def test_bad_filter_code():
    with pytest.raises(ValueError, match="filterCode"):
        parse_duchamp_par("flagATrous 1\nfilterCode 4\n")


def test_flagged_channels_warn_in_2d():
    p = parse_duchamp_par("flagATrous 1\nreconDim 2\nflaggedChannels 0-4\n")
    assert p.ignored == {"flaggedChannels": "0-4"}
    assert any("flaggedChannels" in w for w in p.warnings)
    assert parse_duchamp_par("flagATrous 1\nreconDim 3\nflaggedChannels 0-4\n").warnings == []
