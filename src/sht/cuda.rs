//! CUDA engine for the SHTs (`kernels/sht.cu`).

use realfft::num_complex::Complex64 as C64;

use super::{Job, Plan};
use crate::error::{Error, Result};

pub fn alm2map(
    _plan: &Plan,
    _jobs: &[Job],
    _alms: &[&[C64]],
    _maps: &mut [&mut [f64]],
) -> Result<()> {
    Err(Error::device("the CUDA SHT engine is not built yet"))
}

pub fn map2alm(
    _plan: &Plan,
    _jobs: &[Job],
    _maps: &[&[f64]],
    _iter: usize,
    _alms: &mut [&mut [C64]],
) -> Result<()> {
    Err(Error::device("the CUDA SHT engine is not built yet"))
}
