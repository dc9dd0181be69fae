//! What the CPU offers, detected once per process: the hot loops of every family choose their
//! AVX2 / AVX-512 builds from here (false off x86-64).

use std::sync::OnceLock;

/// Feature bits, detected on first use.
struct Features {
    avx2: bool,
    fma: bool,
    avx512f: bool,
}

fn features() -> &'static Features {
    static F: OnceLock<Features> = OnceLock::new();
    F.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Features {
                avx2: std::is_x86_feature_detected!("avx2"),
                fma: std::is_x86_feature_detected!("fma"),
                avx512f: std::is_x86_feature_detected!("avx512f"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Features {
                avx2: false,
                fma: false,
                avx512f: false,
            }
        }
    })
}

/// AVX2 (the builds that keep the scalar arithmetic: no FMA contraction).
pub fn avx2() -> bool {
    features().avx2
}

/// AVX2 and FMA together.
pub fn avx2_fma() -> bool {
    let f = features();
    f.avx2 && f.fma
}

/// AVX-512F.
pub fn avx512f() -> bool {
    features().avx512f
}
