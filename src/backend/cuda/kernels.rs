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

/// The variants of `module` (macro definitions for `Gpu::module_with`) that `compile_all`
/// compiles besides it, so that every kernel a family instantiates on demand is checked:
/// (label, definitions).
pub fn variants(module: &str) -> Vec<(&'static str, Vec<String>)> {
    match module {
        "scfind" => vec![(
            "register-ring boxcars",
            crate::cube::scfind::cuda_fixed::every_kernel_defines(),
        )],
        _ => Vec::new(),
    }
}

/// The variants of `module` that `skyconv.warmup` loads besides it (those the default call of
/// a family compiles on demand): definitions for `Gpu::module_with`.
pub fn warm_variants(module: &str) -> Vec<Vec<String>> {
    match module {
        "scfind" => vec![crate::cube::scfind::cuda_fixed::sofia2_default_defines()],
        _ => Vec::new(),
    }
}
