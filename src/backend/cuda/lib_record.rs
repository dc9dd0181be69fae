//! The loader's last choice of CUDA libraries, kept on disk so that a fresh process need not
//! open NVRTC (~40 ms, 0.25 s from a cold page cache) and cuFFT (280 MB) just to learn their
//! versions: with every kernel module in the CUBIN cache, a GPU call never opens NVRTC at all,
//! and a call without FFTs never opens cuFFT (`toolkit` opens each on first use).
//!
//! One small text file per situation in `<cache folder>/cuda_libs/`, named by a 128-bit hash
//! of everything the choice depends on: the driver's CUDA version, `SKYCONV_CUDA_VERSION`, the
//! folders searched (in order, with their source) and every candidate library file's path,
//! size, modification time and inode, so a library installed, removed or replaced gives a new
//! name and a fresh search. It holds the choice (toolkit, NVRTC and cuFFT with their versions)
//! and the rejected candidates with their reasons, written only after the libraries chosen
//! were opened for real. Written to a temporary file and renamed (atomic); a file that does not
//! parse, or whose key line differs, is ignored. Off with the kernel cache
//! (`SKYCONV_KERNEL_CACHE=0`); removed by `cache::clear`.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use super::cache;
use super::libs::{Candidate, Lib, Rejected};

const MAGIC: &str = "SKYLIBS1";

/// What is remembered of one choice.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub toolkit: Option<u32>,
    /// The NVRTC chosen and its (major, minor) version.
    pub nvrtc: Option<(Candidate, (i32, i32))>,
    /// The cuFFT chosen and cufftGetVersion's value.
    pub cufft: Option<(Candidate, i32)>,
    pub rejected: Vec<Rejected>,
}

/// The folder of the records (None when the kernel cache is off).
pub fn dir() -> Option<PathBuf> {
    cache::dir()?;
    Some(cache::base_dir()?.join("cuda_libs"))
}

/// The record's name for this situation: 32 hex digits.
pub fn key(
    driver: Option<i32>,
    only: Option<u32>,
    dirs: &[(PathBuf, String)],
    cands: &[Candidate],
) -> String {
    let mut parts: Vec<Vec<u8>> = vec![
        MAGIC.as_bytes().to_vec(),
        format!("driver {driver:?} only {only:?}").into_bytes(),
    ];
    for (d, source) in dirs {
        parts.push(format!("dir {} {source}", d.display()).into_bytes());
    }
    for c in cands {
        let meta = std::fs::metadata(&c.path).ok();
        let stamp = meta
            .map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
            .unwrap_or_default();
        parts.push(format!("lib {} {stamp:?}", c.path.display()).into_bytes());
    }
    let refs: Vec<&[u8]> = parts.iter().map(|p| p.as_slice()).collect();
    format!("{:032x}", cache::fnv128(&refs))
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

fn lib_tag(lib: Lib) -> &'static str {
    match lib {
        Lib::Nvrtc => "nvrtc",
        Lib::Cufft => "cufft",
    }
}

/// The text of a record under `key`.
pub fn encode(key: &str, r: &Record) -> String {
    let mut out = format!("{MAGIC}\nkey\t{key}\n");
    if let Some(t) = r.toolkit {
        out += &format!("toolkit\t{t}\n");
    }
    let cand = |c: &Candidate| format!("{}\t{}\t{}", c.toolkit, clean(&c.source), c.path.display());
    if let Some((c, (a, b))) = &r.nvrtc {
        out += &format!("{}\t{a}.{b}\t{}\n", lib_tag(c.lib), cand(c));
    }
    if let Some((c, v)) = &r.cufft {
        out += &format!("{}\t{v}\t{}\n", lib_tag(c.lib), cand(c));
    }
    for x in &r.rejected {
        out += &format!("rejected\t{}\t{}\n", clean(&x.reason), x.path.display());
    }
    out += "end\n";
    out
}

/// The record in `text` if it is well formed and stored under `key`.
pub fn decode(key: &str, text: &str) -> Option<Record> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC || lines.next()? != format!("key\t{key}") {
        return None;
    }
    let mut r = Record {
        toolkit: None,
        nvrtc: None,
        cufft: None,
        rejected: Vec::new(),
    };
    let mut ended = false;
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let cand = |lib: Lib| -> Option<Candidate> {
            Some(Candidate {
                lib,
                toolkit: f.get(2)?.parse().ok()?,
                source: f.get(3)?.to_string(),
                path: PathBuf::from(f.get(4)?),
            })
        };
        match f[0] {
            "toolkit" if f.len() == 2 => r.toolkit = Some(f[1].parse().ok()?),
            "nvrtc" if f.len() == 5 => {
                let (a, b) = f[1].split_once('.')?;
                r.nvrtc = Some((cand(Lib::Nvrtc)?, (a.parse().ok()?, b.parse().ok()?)));
            }
            "cufft" if f.len() == 5 => r.cufft = Some((cand(Lib::Cufft)?, f[1].parse().ok()?)),
            "rejected" if f.len() == 3 => r.rejected.push(Rejected {
                reason: f[1].to_string(),
                path: PathBuf::from(f[2]),
            }),
            "end" if f.len() == 1 => ended = true,
            _ => return None,
        }
    }
    ended.then_some(r)
}

fn path_of(key: &str) -> Option<PathBuf> {
    Some(dir()?.join(format!("{key}.txt")))
}

/// The record stored under `key`, if there is a sound one.
pub fn load(key: &str) -> Option<Record> {
    decode(key, &std::fs::read_to_string(path_of(key)?).ok()?)
}

/// Keep `r` under `key` (temporary file + rename; a folder that cannot be written only costs
/// the next process the library loads).
pub fn store(key: &str, r: &Record) {
    let Some(path) = path_of(key) else {
        return;
    };
    let _ = cache::write_atomic(&path, encode(key, r).as_bytes());
}

/// Forget the record under `key` (a remembered library that no longer opens).
pub fn forget(key: &str) {
    if let Some(p) = path_of(key) {
        let _ = std::fs::remove_file(p);
    }
}

/// Remove every record; the number of files removed.
pub fn clear() -> std::io::Result<usize> {
    cache::clear_folder(dir(), ".txt")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(lib: Lib, t: u32, p: &str) -> Candidate {
        Candidate {
            lib,
            toolkit: t,
            path: PathBuf::from(p),
            source: "python".into(),
        }
    }

    #[test]
    fn round_trip_and_damage() {
        let r = Record {
            toolkit: Some(13),
            nvrtc: Some((cand(Lib::Nvrtc, 13, "/x/libnvrtc.so.13"), (13, 0))),
            cufft: Some((cand(Lib::Cufft, 13, "/x/libcufft.so.12"), 12000)),
            rejected: vec![Rejected {
                path: PathBuf::from("/y/libnvrtc.so.12"),
                reason: "cannot\tbe loaded:\nbad".into(),
            }],
        };
        let text = encode("k1", &r);
        let back = decode("k1", &text).unwrap();
        assert_eq!(back.nvrtc, r.nvrtc);
        assert_eq!(back.cufft, r.cufft);
        assert_eq!(back.toolkit, Some(13));
        assert_eq!(back.rejected[0].reason, "cannot be loaded: bad");
        assert!(decode("k2", &text).is_none(), "another key");
        assert!(decode("k1", &text[..text.len() - 4]).is_none(), "cut short");
        assert!(
            decode("k1", &text.replace("13.0", "x")).is_none(),
            "bad version"
        );
        let empty = Record {
            toolkit: None,
            nvrtc: None,
            cufft: None,
            rejected: vec![],
        };
        assert_eq!(decode("k", &encode("k", &empty)), Some(empty));
    }
}
