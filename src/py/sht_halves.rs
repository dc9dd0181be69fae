//! Bindings of the SHT halves (skyconv.sht_halves): alm2leg, leg2map, map2leg, leg2alm.
//! Arrays arrive C-contiguous and typed from the Python layer, which checks their shapes;
//! the Rust functions check them again.

use numpy::{
    Complex64, PyArrayDyn, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::backend::{self, Device};
use crate::error::{Error, Result};
use crate::py::arrays::empty_for;
use crate::py::errors::{compute_on, to_pyerr};
use crate::sht::cuda::halves as cuda_halves;
use crate::sht::{halves, AlmLayout, Plan};

fn indices(a: &PyReadonlyArray1<'_, i64>, name: &str) -> PyResult<Vec<usize>> {
    let s = a
        .as_slice()
        .map_err(|_| crate::py::errors::value_err(format!("{name} must be C-contiguous")))?;
    s.iter()
        .map(|&v| {
            usize::try_from(v)
                .map_err(|_| to_pyerr(Error::value(format!("{name} must be >= 0, got {v}"))))
        })
        .collect()
}

fn rows<'a, T: numpy::Element>(
    a: &'a PyReadonlyArray2<'_, T>,
    name: &str,
) -> PyResult<Vec<&'a [T]>> {
    let n = a.shape()[1];
    let s = a
        .as_slice()
        .map_err(|_| crate::py::errors::value_err(format!("{name} must be C-contiguous")))?;
    Ok(if n == 0 {
        vec![&s[..0]; a.shape()[0]]
    } else {
        s.chunks(n).collect()
    })
}

fn rows_mut<T>(s: &mut [T], ncomp: usize, n: usize) -> Vec<&mut [T]> {
    if n == 0 {
        return (0..ncomp).map(|_| <&mut [T]>::default()).collect();
    }
    s.chunks_mut(n).collect()
}

/// The device of a halves call.
fn device(name: Option<&str>) -> PyResult<Device> {
    backend::resolve(name).map_err(to_pyerr)
}

/// The plan of a halves call, without the per-ring FFT table of the full transform: the CPU
/// ring stages look each ring's FFT up in the process-wide cache (a block needs few of them),
/// the GPU's run on the device.
fn plan(nside: usize, lmax: usize, mmax: usize, w: Option<&[f64]>) -> Result<Plan> {
    Plan::new(nside, AlmLayout::new(lmax, mmax)?, w)
}

/// alm (ncomp, nblk) of the m in `ms` -> leg (ncomp, len(rings), len(ms)).
#[pyfunction]
#[pyo3(signature = (alm, nside, lmax, ms, rings, spin2, device=None))]
#[allow(clippy::too_many_arguments)]
fn _alm2leg<'py>(
    py: Python<'py>,
    alm: PyReadonlyArray2<'py, Complex64>,
    nside: usize,
    lmax: usize,
    ms: PyReadonlyArray1<'py, i64>,
    rings: PyReadonlyArray1<'py, i64>,
    spin2: bool,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<Complex64>>> {
    let dev = self::device(device)?;
    let ms = indices(&ms, "ms")?;
    let rings = indices(&rings, "rings")?;
    let a = rows(&alm, "alm")?;
    let (nc, nr, nm) = (a.len(), rings.len(), ms.len());
    let mmax = ms.last().copied().unwrap_or(0).min(lmax);
    let out = empty_for::<Complex64>(py, &[nc, nr, nm], dev)?;
    {
        // alm2leg writes every element
        let data = unsafe { out.as_slice_mut() }.expect("new arrays are contiguous");
        let mut leg = rows_mut(data, nc, nr * nm);
        compute_on(py, dev, || {
            let p = plan(nside, lmax, mmax, None)?;
            match dev {
                Device::Cpu => halves::alm2leg(&p, spin2, &ms, &rings, &a, &mut leg),
                Device::Cuda(n) => crate::backend::cuda::on(n, || {
                    cuda_halves::alm2leg(&p, spin2, &ms, &rings, &a, &mut leg)
                }),
            }
        })?;
    }
    Ok(out)
}

/// The components of Δ held as pieces (C-contiguous (ncomp, a, b) arrays, cut along one axis):
/// per component, its slice of each piece.
fn pieces_of<'a>(
    leg: &'a [numpy::PyReadonlyArray3<'_, Complex64>],
) -> PyResult<(usize, Vec<Vec<&'a [Complex64]>>)> {
    let nc = leg.first().map_or(0, |p| p.shape()[0]);
    let mut out: Vec<Vec<&[Complex64]>> = vec![Vec::with_capacity(leg.len()); nc];
    for p in leg {
        let sh = p.shape();
        if sh[0] != nc {
            return Err(to_pyerr(Error::shape(format!(
                "every piece of leg needs {nc} components, got {}",
                sh[0]
            ))));
        }
        let flat = p
            .as_slice()
            .map_err(|_| crate::py::errors::value_err("leg must be C-contiguous"))?;
        let n = sh[1] * sh[2];
        for (c, comp) in out.iter_mut().enumerate() {
            comp.push(&flat[c * n..(c + 1) * n]);
        }
    }
    Ok((nc, out))
}

/// Δ's pieces joined into one array per component (a copy): the GPU halves take whole arrays.
/// `sizes`: the pieces' extents along the cut axis; `cut_m`: cut along m (`other` rings ×
/// sizes[k] m each), else along the rings (stacked rows).
fn joined(
    pieces: &[Vec<&[Complex64]>],
    sizes: &[usize],
    other: usize,
    cut_m: bool,
) -> Vec<Vec<Complex64>> {
    pieces
        .iter()
        .map(|p| {
            if !cut_m || p.len() == 1 {
                return p.concat();
            }
            let nm: usize = sizes.iter().sum();
            let mut out = Vec::with_capacity(other * nm);
            for i in 0..other {
                for (q, &w) in p.iter().zip(sizes) {
                    out.extend_from_slice(&q[i * w..(i + 1) * w]);
                }
            }
            out
        })
        .collect()
}

/// leg pieces along m [(ncomp, len(rings), width k)] -> pixels (ncomp, sum of the rings'
/// lengths).
#[pyfunction]
#[pyo3(signature = (leg, nside, rings, device=None))]
fn _leg2map<'py>(
    py: Python<'py>,
    leg: Vec<numpy::PyReadonlyArray3<'py, Complex64>>,
    nside: usize,
    rings: PyReadonlyArray1<'py, i64>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let dev = self::device(device)?;
    let rings = indices(&rings, "rings")?;
    let widths: Vec<usize> = leg.iter().map(|p| p.shape()[2]).collect();
    let (nc, pieces) = pieces_of(&leg)?;
    let nm: usize = widths.iter().sum();
    if nm == 0 {
        return Err(to_pyerr(Error::shape("leg needs at least one m (m = 0)")));
    }
    let p = plan(nside, 0, 0, None).map_err(to_pyerr)?;
    let npix: usize = rings
        .iter()
        .map(|&r| p.rings.get(r).map_or(0, |g| g.nphi))
        .sum();
    let out = empty_for::<f64>(py, &[nc, npix], dev)?;
    {
        // leg2map writes every pixel
        let data = unsafe { out.as_slice_mut() }.expect("new arrays are contiguous");
        let mut maps = rows_mut(data, nc, npix);
        compute_on(py, dev, || match dev {
            Device::Cpu => halves::leg2map_pieces(&p, &rings, &widths, &pieces, &mut maps),
            Device::Cuda(n) => {
                let whole = joined(&pieces, &widths, rings.len(), true);
                let l: Vec<&[Complex64]> = whole.iter().map(|v| v.as_slice()).collect();
                crate::backend::cuda::on(n, || {
                    cuda_halves::leg2map(&p, &rings, nm - 1, &l, &mut maps)
                })
            }
        })?;
    }
    Ok(out)
}

/// pixels (ncomp, sum of the rings' lengths) -> leg pieces along m [(ncomp, len(rings),
/// widths[k])], m = 0..sum(widths) − 1.
#[pyfunction]
#[pyo3(signature = (maps, nside, widths, rings, device=None))]
fn _map2leg<'py>(
    py: Python<'py>,
    maps: PyReadonlyArray2<'py, f64>,
    nside: usize,
    widths: Vec<usize>,
    rings: PyReadonlyArray1<'py, i64>,
    device: Option<&str>,
) -> PyResult<Vec<Bound<'py, PyArrayDyn<Complex64>>>> {
    let dev = self::device(device)?;
    let rings = indices(&rings, "rings")?;
    let m = rows(&maps, "maps")?;
    let (nc, nr) = (m.len(), rings.len());
    let nm: usize = widths.iter().sum();
    if nm == 0 {
        return Err(to_pyerr(Error::value(
            "widths must hold at least one m (m = 0)",
        )));
    }
    let p = plan(nside, 0, 0, None).map_err(to_pyerr)?;
    let outs = widths
        .iter()
        .map(|&w| empty_for::<Complex64>(py, &[nc, nr, w], dev))
        .collect::<PyResult<Vec<_>>>()?;
    {
        // map2leg writes every element of every piece
        let mut datas: Vec<&mut [Complex64]> = outs
            .iter()
            .map(|o| unsafe { o.as_slice_mut() }.expect("new arrays are contiguous"))
            .collect();
        let mut leg: Vec<Vec<&mut [Complex64]>> = (0..nc).map(|_| Vec::new()).collect();
        for (d, &w) in datas.iter_mut().zip(&widths) {
            for (c, part) in rows_mut(d, nc, nr * w).into_iter().enumerate() {
                leg[c].push(part);
            }
        }
        compute_on(py, dev, || match dev {
            Device::Cpu => halves::map2leg_pieces(&p, &rings, &widths, &m, &mut leg),
            Device::Cuda(n) => {
                let mut whole = vec![Complex64::new(0.0, 0.0); nc * nr * nm];
                let mut l = rows_mut(&mut whole, nc, nr * nm);
                crate::backend::cuda::on(n, || {
                    cuda_halves::map2leg(&p, &rings, nm - 1, &m, &mut l)
                })?;
                for (c, parts) in leg.iter_mut().enumerate() {
                    let mut m0 = 0;
                    for (q, &w) in parts.iter_mut().zip(&widths) {
                        for i in 0..nr {
                            let row = &l[c][i * nm + m0..i * nm + m0 + w];
                            q[i * w..(i + 1) * w].copy_from_slice(row);
                        }
                        m0 += w;
                    }
                }
                Ok(())
            }
        })?;
    }
    Ok(outs)
}

/// leg pieces along the rings [(ncomp, rings of piece k, len(ms))] -> alm (ncomp, nblk) of the
/// m in `ms`; `rings` are the pieces' rings in order.
#[pyfunction]
#[pyo3(signature = (leg, nside, lmax, ms, rings, spin2, ring_weights=None, device=None))]
#[allow(clippy::too_many_arguments)]
fn _leg2alm<'py>(
    py: Python<'py>,
    leg: Vec<numpy::PyReadonlyArray3<'py, Complex64>>,
    nside: usize,
    lmax: usize,
    ms: PyReadonlyArray1<'py, i64>,
    rings: PyReadonlyArray1<'py, i64>,
    spin2: bool,
    ring_weights: Option<PyReadonlyArray1<'py, f64>>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyArrayDyn<Complex64>>> {
    let dev = self::device(device)?;
    let ms = indices(&ms, "ms")?;
    let rings = indices(&rings, "rings")?;
    let w = match &ring_weights {
        Some(w) => Some(
            w.as_slice()
                .map_err(|_| crate::py::errors::value_err("ring_weights must be C-contiguous"))?,
        ),
        None => None,
    };
    let sizes: Vec<usize> = leg.iter().map(|p| p.shape()[1]).collect();
    let (nc, pieces) = pieces_of(&leg)?;
    let nblk: usize = ms.iter().map(|&m| (lmax + 1).saturating_sub(m)).sum();
    let mmax = ms.last().copied().unwrap_or(0).min(lmax);
    let out = empty_for::<Complex64>(py, &[nc, nblk], dev)?;
    {
        // leg2alm overwrites every coefficient
        let data = unsafe { out.as_slice_mut() }.expect("new arrays are contiguous");
        let mut alm = rows_mut(data, nc, nblk);
        compute_on(py, dev, || {
            let p = plan(nside, lmax, mmax, w)?;
            match dev {
                Device::Cpu => {
                    halves::leg2alm_pieces(&p, spin2, &ms, &rings, &sizes, &pieces, &mut alm)
                }
                Device::Cuda(n) => {
                    let whole = joined(&pieces, &sizes, ms.len(), false);
                    let l: Vec<&[Complex64]> = whole.iter().map(|v| v.as_slice()).collect();
                    crate::backend::cuda::on(n, || {
                        cuda_halves::leg2alm(&p, spin2, &ms, &rings, &l, &mut alm)
                    })
                }
            }
        })?;
    }
    Ok(out)
}

/// The m blocks of a split transform ([m0, m1) per worker, possibly empty): the one rule,
/// `crate::sht::split::m_blocks`.
#[pyfunction]
fn _m_blocks(lmax: usize, mmax: usize, n: usize) -> PyResult<Vec<(usize, usize)>> {
    if mmax > lmax || n == 0 {
        return Err(to_pyerr(Error::value(format!(
            "need 0 <= mmax <= lmax and n >= 1, got lmax={lmax}, mmax={mmax}, n={n}"
        ))));
    }
    Ok(crate::sht::split::m_blocks(lmax, mmax, n))
}

/// The ring blocks of a split transform ([r0, r1) per worker, possibly empty): the one rule,
/// `crate::sht::split::ring_blocks_of`.
#[pyfunction]
fn _ring_blocks(nside: usize, n: usize) -> PyResult<Vec<(usize, usize)>> {
    crate::healpix::check_nside(nside as u64, false).map_err(to_pyerr)?;
    if n == 0 {
        return Err(to_pyerr(Error::value(format!("n must be >= 1, got {n}"))));
    }
    let rings = crate::healpix::rings(nside as u64);
    Ok(crate::sht::split::ring_blocks_of(&rings, n))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_m_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(_ring_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(_alm2leg, m)?)?;
    m.add_function(wrap_pyfunction!(_leg2map, m)?)?;
    m.add_function(wrap_pyfunction!(_map2leg, m)?)?;
    m.add_function(wrap_pyfunction!(_leg2alm, m)?)?;
    Ok(())
}
