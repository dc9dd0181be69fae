//! The device memory a call needs (`Need`), and how to fit it in the budget (`choose`): the
//! layout of the spectral rows (resident or packed channel blocks) and, when the samples do
//! not all fit, chunks of samples. `memory_plan` shows the choice to the tests.

use super::args::{MAX_CW, TILE};
use crate::error::{Error, Result};
use crate::grid::plan::nside_for;

/// Fewest samples per chunk before giving up with a GpuMemoryError.
const MIN_CHUNK: usize = 1 << 12;

/// Where the spectral rows live on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// All `n × nchan` rows (and per-channel weights) uploaded once; blocks of `MAX_CW`.
    Resident,
    /// Blocks of `cb` channels packed on the way up, two on the device at a time.
    Packed { cb: usize },
}

/// Sizes that decide the device memory a call needs.
pub(super) struct Need {
    pub(super) nt: usize,
    pub(super) nchan: usize,
    pub(super) sz_t: usize,
    pub(super) sz_o: usize,
    /// Per-channel weights (a second array of rows).
    pub(super) full: bool,
    /// One-value-per-sample arrays uploaded besides the coordinates (scalar data, shared w).
    pub(super) per_sample_t: usize,
    pub(super) finish: bool,
    pub(super) nrings: usize,
}

impl Need {
    /// Block width (channels per gather launch).
    pub(super) fn block(&self, layout: Layout) -> usize {
        match layout {
            Layout::Resident => self.nchan.min(MAX_CW),
            Layout::Packed { cb } => cb,
        }
    }

    /// Device bytes to grid `m` samples with `layout`.
    pub(super) fn bytes(&self, m: usize, layout: Layout) -> usize {
        let rows = 1 + usize::from(self.full);
        // lon, lat, keys and values (twice for the sort), unit vectors, per-sample values.
        let plan = m * (16 + 16 + 8 + 24 + 16 + self.per_sample_t * self.sz_t)
            + 4 * 256 * m.div_ceil(TILE)
            + 40 * (self.nrings + 1)
            + 8 * 256 * 4;
        let cb = self.block(layout);
        let data = if self.nchan == 1 {
            0
        } else {
            match layout {
                Layout::Resident => m * self.nchan * self.sz_t * rows,
                Layout::Packed { cb } => 2 * m * cb * self.sz_t * rows,
            }
        };
        // Two slots of f64 sums and (Finish) of the two outputs.
        let slots = 2 * cb * self.nt * (16 + if self.finish { 2 * self.sz_o } else { 0 });
        // Coordinates and the weight map.
        let targets = 24 * self.nt;
        let total = plan + data + slots + targets;
        total + total / 64 + (8 << 20)
    }
}

/// How to split a call to fit the budget: a layout for whole calls, or sample chunks.
pub(super) fn choose(need: &Need, n: usize, budget: usize) -> Result<(usize, Layout)> {
    let mut layouts = vec![Layout::Resident];
    if need.nchan > 1 {
        let mut cb = need.nchan.min(MAX_CW);
        loop {
            layouts.push(Layout::Packed { cb });
            if cb == 1 {
                break;
            }
            cb = cb.div_ceil(2);
        }
    }
    for &l in &layouts {
        if need.bytes(n, l) <= budget {
            return Ok((n, l));
        }
    }
    // Chunks of samples (the bytes are affine in m), with narrower channel blocks if the
    // per-block outputs leave too little room.
    let mut cb = need.nchan.min(32);
    loop {
        let layout = if need.nchan > 1 {
            Layout::Packed { cb }
        } else {
            Layout::Resident
        };
        let fixed = need.bytes(0, layout);
        let per = need.bytes(1 << 20, layout).saturating_sub(fixed) / (1 << 20) + 1;
        let m = budget.saturating_sub(fixed) / per;
        if m >= MIN_CHUNK {
            return Ok((m.min(n), layout));
        }
        if cb == 1 {
            return Err(Error::GpuMemory(format!(
                "gridding needs at least {:.2} GiB of GPU memory ({} target pixels), the budget \
                 is {:.2} GiB: use fewer target pixels per call, or device='cpu'",
                need.bytes(MIN_CHUNK, layout) as f64 / (1u64 << 30) as f64,
                need.nt,
                budget as f64 / (1u64 << 30) as f64
            )));
        }
        cb = cb.div_ceil(2);
    }
}

/// Pageable rows of at least this many bytes go up in packed blocks even when they would fit
/// resident (`prefer_overlap`).
const OVERLAP_BYTES: usize = 32 << 20;

/// The layout for a call whose samples all fit at once. Resident rows wait for the whole
/// upload before the first gather; when they are pageable (so the host copies them through the
/// staging buffers anyway), large, and span several gathers, packed blocks of `MAX_CW` channels
/// go faster: block k + 1 is repacked and uploaded while block k is gathered. Page-locked rows
/// stay resident (their blocks' 2-D DMAs overlap the gathers too, with no host copy at all).
pub(super) fn prefer_overlap<T>(
    need: &Need,
    n: usize,
    layout: Layout,
    data: &[T],
    page_locked: bool,
    budget: usize,
) -> Layout {
    let packed = Layout::Packed { cb: MAX_CW };
    // SKYCONV_GRID_OVERLAP=0 keeps such rows resident (to compare the two on a machine).
    let off = std::env::var("SKYCONV_GRID_OVERLAP").is_ok_and(|v| v.trim() == "0");
    let wanted = !off
        && layout == Layout::Resident
        && need.nchan > MAX_CW
        && std::mem::size_of_val(data) >= OVERLAP_BYTES
        && need.bytes(n, packed) <= budget
        && !page_locked;
    if wanted {
        packed
    } else {
        layout
    }
}

/// What `grid` would do for a call of this size within `budget` bytes: (samples per chunk,
/// "resident" or "packed", channels per block, device bytes needed). `weights` is "none",
/// "shared" or "full". Lets the tests force each path with `SKYCONV_GPU_MEMORY_LIMIT`.
#[allow(clippy::too_many_arguments)]
pub fn memory_plan(
    n: usize,
    nt: usize,
    nchan: usize,
    sz_t: usize,
    sz_o: usize,
    weights: &str,
    finish: bool,
    radius: f64,
    budget: usize,
) -> Result<(usize, &'static str, usize, usize)> {
    let need = Need {
        nt,
        nchan,
        sz_t,
        sz_o,
        full: nchan > 1 && weights == "full",
        per_sample_t: usize::from(nchan == 1)
            + usize::from(weights == "shared" || (weights == "full" && nchan == 1)),
        finish,
        nrings: 4 * nside_for(radius) as usize,
    };
    let (m, layout) = choose(&need, n, budget)?;
    let name = match layout {
        Layout::Resident => "resident",
        Layout::Packed { .. } => "packed",
    };
    let cb = if nchan == 1 { 1 } else { need.block(layout) };
    Ok((m, name, cb, need.bytes(m, layout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choose_fits_the_budget() {
        let need = Need {
            nt: 90_000,
            nchan: 1024,
            sz_t: 4,
            sz_o: 4,
            full: false,
            per_sample_t: 0,
            finish: true,
            nrings: 8192,
        };
        let n = 200_000;
        let (m, l) = choose(&need, n, 64 << 30).unwrap();
        assert_eq!((m, l), (n, Layout::Resident));
        let (m, l) = choose(&need, n, 600 << 20).unwrap();
        assert_eq!(m, n);
        assert!(matches!(l, Layout::Packed { .. }), "{l:?}");
        assert!(need.bytes(m, l) <= 600 << 20);
        let (m, l) = choose(&need, 20_000_000, 600 << 20).unwrap();
        assert!(m < 20_000_000 && need.bytes(m, l) <= 600 << 20, "{m} {l:?}");
        assert!(choose(&need, n, 1 << 20).is_err());
        let scalar = Need {
            nchan: 1,
            per_sample_t: 1,
            ..need
        };
        let (m, l) = choose(&scalar, 10_000_000, 300 << 20).unwrap();
        assert!(m < 10_000_000 && scalar.bytes(m, l) <= 300 << 20, "{m}");
    }
}
