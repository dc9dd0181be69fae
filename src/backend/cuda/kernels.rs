//! The CUDA C sources in `kernels/`, embedded at build time. `common.cuh` is prepended to each
//! module (NVRTC is given one self-contained translation unit; no include paths needed).

const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// (module name, source) of every kernel module.
pub const MODULES: &[(&str, &str)] = &[
    ("filters", include_str!("../../../kernels/filters.cu")),
    ("select", include_str!("../../../kernels/select.cu")),
    ("scfind", include_str!("../../../kernels/scfind.cu")),
    ("atrous", include_str!("../../../kernels/atrous.cu")),
    ("grid", include_str!("../../../kernels/grid.cu")),
    ("sht", include_str!("../../../kernels/sht.cu")),
    ("ringfft", include_str!("../../../kernels/ringfft.cu")),
    ("smooth", include_str!("../../../kernels/smooth.cu")),
];

/// The full translation unit for `module`, or None if there is no such module.
pub fn translation_unit(module: &str) -> Option<String> {
    MODULES
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(name, src)| {
            format!("#line 1 \"common.cuh\"\n{COMMON}\n#line 1 \"{name}.cu\"\n{src}")
        })
}

/// A kernel module compiled with macro definitions (`Gpu::module_with`): kernels a family
/// instantiates on demand. The families name their variants (the backend knows none);
/// `compile_all` and `warmup` take them from their caller.
pub struct Variant {
    pub module: &'static str,
    /// What the variant holds (`compile_all` reports it as "module+label").
    pub label: &'static str,
    /// "NAME=VALUE" each.
    pub defines: Vec<String>,
}
