//! The on-disk cache of compiled kernel modules (CUBIN), so that a fresh process skips NVRTC.
//!
//! Folder: `SKYCONV_CACHE_DIR`, else `$XDG_CACHE_HOME/skyconv`, else `~/.cache/skyconv`; the
//! modules live in its `kernels/` subfolder. `SKYCONV_KERNEL_CACHE=0` (or off/false/no) turns the cache off.
//! An entry is named by a 128-bit FNV-1a hash of the kernel source, the compile options, the
//! architecture and NVRTC's version, and holds a header (magic, the key, the length and a
//! 64-bit hash of the CUBIN) before the CUBIN: an entry that does not check out is ignored and
//! rewritten. Writes go to a temporary file in the same folder, renamed into place (atomic on
//! POSIX), so concurrent processes never see a half-written entry; the last writer wins and
//! every writer writes the same bytes.

use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"SKYCUBN1";
const HEADER: usize = 8 + 32 + 8 + 8;

/// The cache folder, or None when the cache is off or no folder can be named.
pub fn dir() -> Option<PathBuf> {
    // A bad value was refused when the device was resolved (`env::check_gpu_vars`).
    if matches!(
        crate::backend::env::switch_var("SKYCONV_KERNEL_CACHE"),
        Ok(Some(false))
    ) {
        return None;
    }
    Some(base_dir()?.join("kernels"))
}

/// skyconv's cache folder (`SKYCONV_CACHE_DIR`, else `$XDG_CACHE_HOME/skyconv`, else
/// `~/.cache/skyconv`; the Python side's `smooth.cost.cache_path` follows the same rule), or
/// None when none can be named.
pub fn base_dir() -> Option<PathBuf> {
    let nonempty = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    nonempty("SKYCONV_CACHE_DIR")
        .or_else(|| nonempty("XDG_CACHE_HOME").map(|d| d.join("skyconv")))
        .or_else(|| nonempty("HOME").map(|d| d.join(".cache").join("skyconv")))
}

pub(crate) fn fnv128(parts: &[&[u8]]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for p in parts {
        // length first, so that ("ab", "c") and ("a", "bc") differ
        for b in (p.len() as u64).to_le_bytes().iter().chain(p.iter()) {
            h ^= *b as u128;
            h = h.wrapping_mul(PRIME);
        }
    }
    h
}

pub(crate) fn fnv64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The entry name for a module: 32 hex digits.
pub fn key(source: &str, options: &[String], arch: (i32, i32), nvrtc: (i32, i32)) -> String {
    let opts = options.join("\u{1f}");
    let arch = format!("sm_{}{}", arch.0, arch.1);
    let ver = format!("nvrtc {}.{}", nvrtc.0, nvrtc.1);
    let h = fnv128(&[
        source.as_bytes(),
        opts.as_bytes(),
        arch.as_bytes(),
        ver.as_bytes(),
    ]);
    format!("{h:032x}")
}

fn path_of(key: &str) -> Option<PathBuf> {
    Some(dir()?.join(format!("{key}.cubin")))
}

/// The bytes of a well-formed entry, or None.
fn decode(key: &str, raw: &[u8]) -> Option<Vec<u8>> {
    if raw.len() < HEADER || &raw[..8] != MAGIC || &raw[8..40] != key.as_bytes() {
        return None;
    }
    let len = u64::from_le_bytes(raw[40..48].try_into().ok()?) as usize;
    let sum = u64::from_le_bytes(raw[48..56].try_into().ok()?);
    let body = &raw[HEADER..];
    if body.len() != len || fnv64(body) != sum || !body.starts_with(b"\x7fELF") {
        return None;
    }
    Some(body.to_vec())
}

/// The cached CUBIN for `key`, if there is a sound one.
pub fn load(key: &str) -> Option<Vec<u8>> {
    let raw = std::fs::read(path_of(key)?).ok()?;
    decode(key, &raw)
}

/// Store `cubin` under `key` (temporary file + rename).
pub fn store(key: &str, cubin: &[u8]) -> std::io::Result<()> {
    let Some(path) = path_of(key) else {
        return Ok(());
    };
    let mut bytes = Vec::with_capacity(MAGIC.len() + key.len() + 16 + cubin.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&fnv64(cubin).to_le_bytes());
    bytes.extend_from_slice(cubin);
    write_atomic(&path, &bytes)
}

/// Write `bytes` to `path` through a temporary file in the same folder and a rename, so that
/// concurrent readers see the old file or the whole new one (the cache's and the library
/// records' one way to write).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let folder = path.parent().expect("entries live in a folder");
    std::fs::create_dir_all(folder)?;
    // unique per process and call: several threads (GPUs) may store the same file at once
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().expect("a file").to_string_lossy();
    let tmp = folder.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Remove the files of `folder` whose names end with `suffix`, and stray temporary files;
/// how many were removed (0 where the folder does not exist).
pub fn clear_folder(folder: Option<PathBuf>, suffix: &str) -> std::io::Result<usize> {
    let Some(d) = folder else {
        return Ok(0);
    };
    let entries = match std::fs::read_dir(&d) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(suffix) || name.ends_with(".tmp") {
            std::fs::remove_file(e.path())?;
            n += 1;
        }
    }
    Ok(n)
}

/// Remove every entry (and stray temporary files); returns how many files were removed.
pub fn clear() -> std::io::Result<usize> {
    clear_folder(dir(), ".cubin")
}
