"""examples/mpi_sht.py under `mpiexec -n 2`: alm2map and map2alm split over two MPI ranks with
the public SHT halves equal the single-process transforms to <= 1e-12 relative (the example's
--check mode: spin 0 and 2, iter 0 and 3, lmax != 2 nside, mmax < lmax, fewer m than ranks)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mpi_sht.py"


def test_mpi_two_ranks_match_single_process():
    pytest.importorskip("mpi4py")
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if mpiexec is None:
        pytest.skip("no mpiexec on PATH")
    run = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, str(EXAMPLE), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    lines = [ln for ln in out.splitlines() if "max relative error" in ln]
    errs = [float(x) for ln in lines for x in re.findall(r"(?:alm2map|map2alm) ([0-9.e+-]+)", ln)]
    assert len(errs) == 10, out  # 5 cases x (alm2map, map2alm)
    assert max(errs) <= 1e-12
    assert "ranks=2" in out
