//! skyconv's environment variables, read one way: unset or blank means "not set"; any other
//! value that does not parse is an `ArgumentError` naming the variable and what it accepts.

use crate::error::{Error, Result};

/// `name` as an unsigned integer at least `min`; `accepted` describes the values for the
/// message ("a positive integer (CPU threads)").
pub fn usize_var(name: &str, min: usize, accepted: &str) -> Result<Option<usize>> {
    let Ok(raw) = std::env::var(name) else {
        return Ok(None);
    };
    let s = raw.trim();
    if s.is_empty() {
        return Ok(None);
    }
    match s.parse::<usize>() {
        Ok(n) if n >= min => Ok(Some(n)),
        _ => Err(Error::value(format!(
            "environment variable {name} must be {accepted}, got {raw:?} (unset it for the \
             default)"
        ))),
    }
}

/// `name` as an on/off switch: "1", "on", "true", "yes" or "0", "off", "false", "no" (any
/// case); `None` when unset or blank.
pub fn switch_var(name: &str) -> Result<Option<bool>> {
    let Ok(raw) = std::env::var(name) else {
        return Ok(None);
    };
    match raw.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "1" | "on" | "true" | "yes" => Ok(Some(true)),
        "0" | "off" | "false" | "no" => Ok(Some(false)),
        _ => Err(Error::value(format!(
            "environment variable {name} must be 1 (on) or 0 (off) (also on/off, true/false, \
             yes/no), got {raw:?} (unset it for the default)"
        ))),
    }
}

/// The CUDA toolkits skyconv can load (`SKYCONV_CUDA_VERSION` picks one).
pub const CUDA_MAJORS: [u32; 2] = [12, 13];

/// `SKYCONV_CUDA_VERSION`: the CUDA major version to load (12 or 13; "12.4" reads as 12), or
/// `None` when unset or blank.
pub fn cuda_version() -> Result<Option<u32>> {
    const NAME: &str = "SKYCONV_CUDA_VERSION";
    let Ok(raw) = std::env::var(NAME) else {
        return Ok(None);
    };
    let s = raw.trim();
    if s.is_empty() {
        return Ok(None);
    }
    match s.split('.').next().and_then(|m| m.parse::<u32>().ok()) {
        Some(v) if CUDA_MAJORS.contains(&v) => Ok(Some(v)),
        _ => Err(Error::value(format!(
            "environment variable {NAME} must be 12 or 13 (the CUDA toolkit to load), got \
             {raw:?} (unset it to take the newest the driver supports)"
        ))),
    }
}

/// Check every variable the GPU engine reads, before any device is touched (called when a
/// device other than "cpu" is resolved), so that a bad value is an `ArgumentError` naming the
/// variable rather than a device error, a silently ignored setting, or a failure mid-call.
pub fn check_gpu_vars() -> Result<()> {
    cuda_version()?;
    switch_var("SKYCONV_KERNEL_CACHE")?;
    switch_var("SKYCONV_PIN_HOST")?;
    usize_var("SKYCONV_PINNED_MAX_MB", 0, "a whole number of MiB (0: off)")?;
    usize_var("SKYCONV_GPU_MEMORY_LIMIT", 0, "a whole number of bytes")?;
    ring_block_pixels()?;
    Ok(())
}

/// `SKYCONV_RING_BLOCK_PIXELS`: the GPU ring method (smoothing) runs in ring blocks of at most
/// this many pixels even where the whole map fits (tests of the blocked engine at small nside).
pub fn ring_block_pixels() -> Result<Option<usize>> {
    usize_var(
        "SKYCONV_RING_BLOCK_PIXELS",
        1,
        "a positive whole number of pixels (unset: blocks only where the map does not fit)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_name_the_variable() {
        let name = "SKYCONV_TEST_ENV_HELPER";
        std::env::set_var(name, "abc");
        let e = usize_var(name, 1, "a positive integer")
            .unwrap_err()
            .to_string();
        assert!(e.contains(name) && e.contains("abc"), "{e}");
        std::env::set_var(name, "0");
        assert!(usize_var(name, 1, "a positive integer").is_err());
        std::env::set_var(name, " 3 ");
        assert_eq!(usize_var(name, 1, "a positive integer").unwrap(), Some(3));
        std::env::set_var(name, "");
        assert_eq!(usize_var(name, 1, "a positive integer").unwrap(), None);
        std::env::remove_var(name);
        assert_eq!(usize_var(name, 1, "a positive integer").unwrap(), None);
    }

    #[test]
    fn switches_accept_on_off_words_only() {
        let name = "SKYCONV_TEST_ENV_SWITCH";
        for (v, want) in [
            ("1", true),
            (" On ", true),
            ("yes", true),
            ("0", false),
            ("OFF", false),
        ] {
            std::env::set_var(name, v);
            assert_eq!(switch_var(name).unwrap(), Some(want), "{v}");
        }
        std::env::set_var(name, "maybe");
        let e = switch_var(name).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains("maybe"), "{e}");
        std::env::remove_var(name);
        assert_eq!(switch_var(name).unwrap(), None);
    }
}
