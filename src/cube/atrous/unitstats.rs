//! Per-unit statistics on the CPU: exact k-th values (one unit: the parallel histogram
//! selection of `cube::stats`; many units: one gather-and-select per unit, in parallel) and
//! f64 sums in a fixed order, so results do not depend on the thread count.

use rayon::prelude::*;

use super::{Layout, Stat};
use crate::cube::stats::{self, Values};
use crate::real::Real;

const GRAIN: usize = 1 << 16;

fn values(abs: bool, center: f64) -> Values {
    if abs {
        Values::abs_about(center)
    } else {
        Values::FINITE
    }
}

/// `stat` of every active unit of `data` (see `Engine::stat`).
pub fn unit_stat<T: Real>(
    data: &[T],
    lay: &Layout,
    stat: Stat,
    arg: &[f64],
    center: &[f64],
    active: &[bool],
) -> Vec<f64> {
    if lay.units == 1 {
        if !active[0] {
            return vec![f64::NAN];
        }
        let v = match stat {
            Stat::Count => stats::count(data, Values::FINITE) as f64,
            Stat::Kth { abs } => {
                stats::select_kth(data, arg[0] as usize, values(abs, center[0])).unwrap_or(f64::NAN)
            }
            Stat::Sum { sq } => {
                let c = center[0];
                let parts: Vec<f64> = data
                    .par_chunks(GRAIN)
                    .map(|ch| sum_of(ch.iter().map(|x| x.to_f64()), sq, c))
                    .collect();
                parts.iter().sum()
            }
        };
        return vec![v];
    }
    (0..lay.units)
        .into_par_iter()
        .map_init(Vec::new, |buf: &mut Vec<f64>, u| {
            if !active[u] {
                return f64::NAN;
            }
            let unit = (0..lay.len).map(|k| data[lay.index(u, k)].to_f64());
            match stat {
                Stat::Count => unit.filter(|x| x.is_finite()).count() as f64,
                Stat::Sum { sq } => sum_of(unit, sq, center[u]),
                Stat::Kth { abs } => {
                    let vals = values(abs, center[u]);
                    buf.clear();
                    buf.extend(unit.filter_map(|x| vals.map(x)));
                    let k = arg[u] as usize;
                    if k >= buf.len() {
                        return f64::NAN;
                    }
                    let (_, v, _) = buf.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
                    *v
                }
            }
        })
        .collect()
}

fn sum_of(it: impl Iterator<Item = f64>, sq: bool, c: f64) -> f64 {
    let finite = it.filter(|x| x.is_finite());
    if sq {
        finite.map(|x| (x - c) * (x - c)).sum()
    } else {
        finite.sum()
    }
}
