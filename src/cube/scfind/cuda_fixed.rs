//! The register-ring boxcar kernels (`sofia2_boxcar_{rows,lines}_r<R>p<P>_<S>`, one a radius
//! and pass count), compiled on demand. NVRTC spends ~0.3 s on each and there are 72, of which
//! a run launches a few (SoFiA-2's default kernels: 7 of one type), so a run's own set is
//! compiled as a variant of the `scfind` module (SC_FIXED_LIST in kernels/scfind.cu): on a
//! 2-core machine the first S+C call then compiles for ~7 s, not ~29 s.

use std::collections::BTreeMap;

use super::kernels::sofia2_boxcar;
use super::{exact_spatial, exact_spectral, Plan};
use crate::backend::cuda::{CudaFunction, Gpu, Variant};
use crate::error::{Error, Result};
use crate::real::Real;

/// Boxcars fused into one launch, by these kernels and the generic ones (SC_MAX_BOXCARS in
/// kernels/scfind.cu).
pub(super) const MAX_BOXCARS: usize = 4;

/// Ring slots a thread of `sofia2_boxcar_rows` has (SC_ROW_RING_BYTES / sizeof(T)): the rows
/// kernels take a chain whose rings fit, else x runs on transposed planes (lines).
pub(super) fn row_ring_slots<T>() -> usize {
    128 / std::mem::size_of::<T>()
}

/// Whether x boxcars of radii `radii` run in row tiles (every ring fits a thread's slots);
/// else on the transposed planes (lines). The one rule of the launches and of `needed`.
pub(super) fn x_in_rows<T>(radii: &[usize]) -> bool {
    // a ring of 2r + 1 slots fits: 2r + 1 <= slots
    radii.iter().all(|&r| 2 * r < row_ring_slots::<T>())
}

/// Radii of the register-ring kernels (SC_FIXED_MAX_R and SC_FIXED_MAX_R_SINGLE in
/// kernels/scfind.cu): chains of up to MAX_BOXCARS passes of one radius up to FIXED_MAX_R, and
/// single passes along lines up to FIXED_MAX_R_SINGLE.
const FIXED_MAX_R: usize = 4;
const FIXED_MAX_R_SINGLE: usize = 8;

/// One register-ring kernel: along rows (`sofia2_boxcar_rows_*`, x in tiles) or lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Fixed {
    pub rows: bool,
    pub r: usize,
    pub passes: usize,
}

impl Fixed {
    fn axis(&self) -> &'static str {
        if self.rows {
            "rows"
        } else {
            "lines"
        }
    }

    /// The kernel's name for element type `ty` ("f32", "f64").
    fn name(&self, ty: &str) -> String {
        format!(
            "sofia2_boxcar_{}_r{}p{}_{ty}",
            self.axis(),
            self.r,
            self.passes
        )
    }

    /// The macro call instantiating it (kernels/scfind.cu's SC_ROWS_f32 and the like).
    fn instantiation(&self, ty: &str) -> String {
        format!(
            "SC_{}_{ty}({}, {})",
            self.axis().to_uppercase(),
            self.r,
            self.passes
        )
    }
}

/// The launches (radius, passes) of the register-ring kernels for a chain of boxcars of radii
/// `radii`: runs of equal radii, each cut into the fewest launches of at most MAX_BOXCARS passes
/// (as even as possible; the results do not depend on the cut); `lines`: the lines kernel (a
/// lone pass may be wider). None when a radius has no such kernel (the generic kernels then
/// run the whole chain) or with `SKYCONV_SC_FIXED=0` (for comparisons).
pub(super) fn fixed_groups(radii: &[usize], lines: bool) -> Result<Option<Vec<(usize, usize)>>> {
    if crate::backend::env::switch_var("SKYCONV_SC_FIXED")? == Some(false) {
        return Ok(None);
    }
    Ok(fixed_cut(radii, lines))
}

/// `fixed_groups` without the switch.
fn fixed_cut(radii: &[usize], lines: bool) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < radii.len() {
        let r = radii[start];
        let end = start + radii[start..].iter().take_while(|&&x| x == r).count();
        let m = end - start;
        let single = lines && m == 1 && r <= FIXED_MAX_R_SINGLE;
        if r == 0 || (r > FIXED_MAX_R && !single) {
            return None;
        }
        let k = m.div_ceil(MAX_BOXCARS);
        out.extend((0..k).map(|i| (r, m / k + usize::from(i < m % k))));
        start = end;
    }
    Some(out)
}

/// The register-ring kernels `plan`'s kernels launch on element type T (`smooth_exact`'s x,
/// y and spectral boxcars, as `x_boxcars` and `boxcars` pick them; a superset where a launch
/// later takes the generic kernel instead). None with `SKYCONV_SC_FIXED=0`.
fn needed<T: Real>(plan: &Plan) -> Result<Vec<Fixed>> {
    if fixed_groups(&[], false)?.is_none() {
        return Ok(Vec::new());
    }
    let radii = |v: &[crate::cube::filters::Filter1d]| -> Vec<usize> {
        v.iter().map(|f| f.taps() / 2).collect()
    };
    let mut set = Vec::new();
    for ker in &plan.kernels {
        if exact_spatial(ker, plan) {
            set.extend(spatial::<T>(&radii(&ker.x), &radii(&ker.y)));
        }
        if let Some(z) = ker.z.as_ref().filter(|f| exact_spectral(f, plan)) {
            set.extend(chain(&[z.taps() / 2], false));
        }
    }
    set.sort();
    set.dedup();
    Ok(set)
}

/// The launches of a spatial kernel of x radii `xr` and y radii `yr` on element type T: x
/// goes through the transposed planes (lines) when a ring does not fit a row tile.
fn spatial<T: Real>(xr: &[usize], yr: &[usize]) -> Vec<Fixed> {
    let mut v = chain(xr, x_in_rows::<T>(xr));
    v.extend(chain(yr, false));
    v
}

/// The kernels of a chain of boxcars of radii `radii` along rows or lines (`fixed_cut`).
fn chain(radii: &[usize], rows: bool) -> Vec<Fixed> {
    let launches = fixed_cut(radii, !rows).unwrap_or_default();
    launches
        .into_iter()
        .map(|(r, passes)| Fixed { rows, r, passes })
        .collect()
}

/// The variant `skyconv.warmup` loads with the scfind module: the kernels of SoFiA-2's
/// defaults on float32 cubes, so that such a call finds them compiled.
pub fn warm_variants() -> Vec<Variant> {
    vec![Variant {
        module: "scfind",
        label: "SoFiA-2's default boxcars",
        defines: sofia2_default_defines(),
    }]
}

/// Every register-ring kernel as one variant (`compile_all`'s check that each compiles).
pub fn kernel_variants() -> Vec<Variant> {
    vec![Variant {
        module: "scfind",
        label: "register-ring boxcars",
        defines: every_kernel_defines(),
    }]
}

/// The SC_FIXED_LIST of SoFiA-2's default kernels (`scfind.kernelsXY = 0, 3, 6`,
/// `scfind.kernelsZ = 0, 3, 7, 15`) on float32 cubes.
fn sofia2_default_defines() -> Vec<String> {
    let mut set = Vec::new();
    for fwhm in [3.0, 6.0] {
        let (r, n) = sofia2_boxcar(fwhm / super::fwhm_const());
        set.extend(spatial::<f32>(&vec![r; n], &vec![r; n]));
    }
    for width in [3usize, 7, 15] {
        set.extend(chain(&[width / 2], false));
    }
    set.sort();
    set.dedup();
    defines(&set, &["f32"])
}

/// The SC_FIXED_LIST definition instantiating `set` for each element type of `types`.
fn defines(set: &[Fixed], types: &[&str]) -> Vec<String> {
    let list: Vec<String> = types
        .iter()
        .flat_map(|ty| set.iter().map(move |f| f.instantiation(ty)))
        .collect();
    vec![format!("SC_FIXED_LIST={}", list.join(" "))]
}

/// Every register-ring kernel there is, in both types.
fn every_kernel_defines() -> Vec<String> {
    let rows = [true, false];
    let chains = rows.iter().flat_map(|&rows| {
        (1..=FIXED_MAX_R)
            .flat_map(move |r| (1..=MAX_BOXCARS).map(move |passes| Fixed { rows, r, passes }))
    });
    let singles = (FIXED_MAX_R + 1..=FIXED_MAX_R_SINGLE).map(|r| Fixed {
        rows: false,
        r,
        passes: 1,
    });
    defines(&chains.chain(singles).collect::<Vec<_>>(), &["f32", "f64"])
}

/// The register-ring kernels of a run of `plan` on element type T, loaded from one module
/// compiled for them (through the on-disk cache; none when the plan launches none).
pub(super) struct FixedFns {
    ty: &'static str,
    fns: BTreeMap<Fixed, CudaFunction>,
}

impl FixedFns {
    pub fn new<T: Real>(gpu: &Gpu, plan: &Plan) -> Result<Self> {
        let set = needed::<T>(plan)?;
        let fns = if set.is_empty() {
            BTreeMap::new()
        } else {
            load(gpu, &set, T::CUDA)?
        };
        Ok(FixedFns { ty: T::CUDA, fns })
    }

    /// The kernel of `passes` boxcars of radius `r` along rows or lines (one `needed` did not
    /// foresee is compiled alone, in a module of its own).
    pub fn get(&self, gpu: &Gpu, rows: bool, r: usize, passes: usize) -> Result<CudaFunction> {
        let f = Fixed { rows, r, passes };
        match self.fns.get(&f) {
            Some(k) => Ok(k.clone()),
            None => load(gpu, &[f], self.ty)?.remove(&f).ok_or_else(|| {
                Error::Internal(format!("kernel scfind::{} not loaded", f.name(self.ty)))
            }),
        }
    }
}

/// The kernels `set` of element type `ty` from the `scfind` module's variant holding them.
fn load(gpu: &Gpu, set: &[Fixed], ty: &str) -> Result<BTreeMap<Fixed, CudaFunction>> {
    let m = gpu.module_with("scfind", &defines(set, &[ty]))?;
    set.iter()
        .map(|f| {
            let name = f.name(ty);
            m.load_function(&name)
                .map(|k| (*f, k))
                .map_err(|e| Error::Internal(format!("kernel scfind::{name} not found: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_cut_keeps_runs_and_radii() {
        assert_eq!(fixed_cut(&[1, 1, 1], false), Some(vec![(1, 3)]));
        assert_eq!(fixed_cut(&[2; 6], false), Some(vec![(2, 3), (2, 3)]));
        assert_eq!(fixed_cut(&[3; 5], true), Some(vec![(3, 3), (3, 2)]));
        assert_eq!(fixed_cut(&[4; 9], true), Some(vec![(4, 3); 3]));
        assert_eq!(
            fixed_cut(&[1, 2, 2, 1], false),
            Some(vec![(1, 1), (2, 2), (1, 1)])
        );
        assert_eq!(fixed_cut(&[7], true), Some(vec![(7, 1)]));
        assert_eq!(fixed_cut(&[7], false), None); // rows: radius 4 at most
        assert_eq!(fixed_cut(&[9], true), None);
        assert_eq!(fixed_cut(&[5, 5], true), None); // a chain: radius 4 at most
        assert_eq!(fixed_cut(&[0], true), None);
        assert_eq!(fixed_cut(&[], true), Some(vec![]));
    }

    #[test]
    fn sofia2_defaults_are_seven_float32_kernels() {
        // FWHM 3 and 6: 3 boxcars of radius 1 and 2 along x (rows) and y (lines); spectral
        // widths 3, 7, 15: one boxcar of radius 1, 3, 7
        assert_eq!(
            sofia2_default_defines(),
            [
                "SC_FIXED_LIST=SC_LINES_f32(1, 1) SC_LINES_f32(1, 3) SC_LINES_f32(2, 3) \
              SC_LINES_f32(3, 1) SC_LINES_f32(7, 1) SC_ROWS_f32(1, 3) SC_ROWS_f32(2, 3)"
            ]
        );
    }

    #[test]
    fn every_kernel_is_listed_once_in_both_types() {
        let d = every_kernel_defines();
        assert_eq!(d.len(), 1);
        let calls: Vec<&str> = d[0]["SC_FIXED_LIST=".len()..].split(") ").collect();
        // rows and lines chains of radius 1..=4, 1..=4 passes, lines r5..=8 single; two types
        assert_eq!(calls.len(), 2 * (2 * 16 + 4));
        assert!(d[0].contains("SC_ROWS_f32(1, 1)") && d[0].contains("SC_LINES_f64(8, 1)"));
        assert!(!d[0].contains("SC_ROWS_f32(5,") && !d[0].contains("SC_LINES_f32(5, 2)"));
        assert_eq!(
            Fixed {
                rows: true,
                r: 2,
                passes: 3
            }
            .name("f32"),
            "sofia2_boxcar_rows_r2p3_f32"
        );
    }
}
