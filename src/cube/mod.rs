//! Cube (z, y, x) processing: separable filters, and (later) noise statistics, Smooth+Clip and
//! à trous reconstruction built on them.

pub mod atrous;
pub mod filters;
pub mod scfind;
pub mod stats;

use crate::backend::cuda::Variant;

/// The kernels the families compile on demand (variants of their modules), every one: what
/// `compile_all` checks compiles.
pub fn kernel_variants() -> Vec<Variant> {
    let mut v = filters::kernel_variants();
    v.extend(scfind::kernel_variants());
    v
}

/// The variants `skyconv.warmup` loads with their modules: filters' float64 half, and S+C's
/// boxcars of SoFiA-2's defaults on float32 cubes.
pub fn warm_variants() -> Vec<Variant> {
    let mut v = filters::kernel_variants();
    v.extend(scfind::warm_variants());
    v
}
