//! Cube (z, y, x) processing: separable filters, and (later) noise statistics, Smooth+Clip and
//! à trous reconstruction built on them.

pub mod atrous;
pub mod filters;
pub mod scfind;
pub mod stats;
