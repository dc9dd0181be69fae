//! CPU engine: rayon. Five arrays of the data's size live during a call: the input, the
//! output, the smooth array c and two work arrays (the filter passes ping-pong through them;
//! one ends up holding the wavelet coefficients, later the residual).

use rayon::prelude::*;

use super::unitstats::unit_stat;
use super::{Buf, Engine, Layout, Outcome, Plan, Progress, Stat, State, UnitCursor};
use crate::cube::filters::apply_cpu;
use crate::error::Result;
use crate::real::Real;

const GRAIN: usize = 1 << 14;

struct Cpu<'a, T: Real> {
    input: &'a [T],
    out: &'a mut [T],
    plan: &'a Plan,
    c: Vec<T>,
    s: Vec<T>,
    /// Wavelet coefficients / residual.
    w: Vec<T>,
}

#[inline(always)]
fn sub<T: Real>(a: T, b: T) -> T {
    T::from_f64(a.to_f64() - b.to_f64())
}

#[inline(always)]
fn add<T: Real>(a: T, b: T) -> T {
    T::from_f64(a.to_f64() + b.to_f64())
}

impl<T: Real> Engine for Cpu<'_, T> {
    fn stat(
        &mut self,
        buf: Buf,
        stat: Stat,
        arg: &[f64],
        center: &[f64],
        active: &[bool],
    ) -> Result<Vec<f64>> {
        let data = match buf {
            Buf::Input => self.input,
            Buf::Work => &self.w[..],
        };
        Ok(unit_stat(
            data,
            &self.plan.layout,
            stat,
            arg,
            center,
            active,
        ))
    }

    fn start(&mut self, blank: f64) -> Result<()> {
        let blank = T::from_f64(blank);
        self.c
            .par_chunks_mut(GRAIN)
            .zip(self.input.par_chunks(GRAIN).zip(self.out.par_chunks(GRAIN)))
            .for_each(|(c, (x, o))| {
                for ((c, &x), &o) in c.iter_mut().zip(x).zip(o.iter()) {
                    *c = if x.to_f64().is_finite() {
                        sub(x, o)
                    } else {
                        blank
                    };
                }
            });
        Ok(())
    }

    fn scale(&mut self, s: usize) -> Result<()> {
        let passes = &self.plan.passes[s - 1];
        // 1 pass: c→s; 2: c→w→s; 3: c→s→w→s. The smooth array ends in s.
        match passes.len() {
            1 => apply_cpu(&self.c, passes[0].1, &passes[0].0, &mut self.s),
            2 => {
                apply_cpu(&self.c, passes[0].1, &passes[0].0, &mut self.w);
                apply_cpu(&self.w, passes[1].1, &passes[1].0, &mut self.s);
            }
            _ => {
                apply_cpu(&self.c, passes[0].1, &passes[0].0, &mut self.s);
                apply_cpu(&self.s, passes[1].1, &passes[1].0, &mut self.w);
                apply_cpu(&self.w, passes[2].1, &passes[2].0, &mut self.s);
            }
        }
        self.w
            .par_chunks_mut(GRAIN)
            .zip(self.c.par_chunks_mut(GRAIN))
            .zip(self.s.par_chunks(GRAIN).zip(self.input.par_chunks(GRAIN)))
            .for_each(|((w, c), (s, x))| {
                for (((w, c), &s), &x) in w.iter_mut().zip(c.iter_mut()).zip(s).zip(x) {
                    if x.to_f64().is_finite() {
                        *w = sub(*c, s);
                        *c = sub(*c, *w);
                    } else {
                        // c keeps the blank coefficient set by `start`.
                        *w = T::from_f64(f64::NAN);
                    }
                }
            });
        Ok(())
    }

    fn add(&mut self, thr: &[f64], active: &[bool]) -> Result<()> {
        let lay = &self.plan.layout;
        self.out
            .par_chunks_mut(GRAIN)
            .zip(self.w.par_chunks(GRAIN))
            .enumerate()
            .for_each(|(b, (o, w))| {
                let mut cur = UnitCursor::at(lay, b * GRAIN);
                for (o, &w) in o.iter_mut().zip(w) {
                    let u = cur.next_unit();
                    if active[u] && w.to_f64().abs() > thr[u] {
                        *o = add(*o, w);
                    }
                }
            });
        Ok(())
    }

    fn finish(&mut self, active: &[bool]) -> Result<()> {
        let lay = &self.plan.layout;
        self.out
            .par_chunks_mut(GRAIN)
            .zip(self.w.par_chunks_mut(GRAIN))
            .zip(self.c.par_chunks(GRAIN).zip(self.input.par_chunks(GRAIN)))
            .enumerate()
            .for_each(|(b, ((o, r), (c, x)))| {
                let mut cur = UnitCursor::at(lay, b * GRAIN);
                for (((o, r), &c), &x) in o.iter_mut().zip(r.iter_mut()).zip(c).zip(x) {
                    let u = cur.next_unit();
                    if x.to_f64().is_finite() {
                        if active[u] {
                            *o = add(*o, c);
                        }
                        *r = sub(x, *o);
                    } else {
                        *r = T::from_f64(f64::NAN);
                    }
                }
            });
        Ok(())
    }
}

/// Whether to continue on the still-active units only: when at most half of the units the
/// engine holds still iterate (spectra and maps converge after different numbers of
/// iterations; without this, every iteration would filter the whole cube).
fn worth_compacting(st: &State) -> bool {
    let active = st.active_units().len();
    active > 0 && st.current_units() >= 2 && 2 * active <= st.current_units()
}

/// Shape of the array holding only `n` units of `lay`.
fn compact_shape(lay: &Layout, n: usize) -> Vec<usize> {
    if lay.dim == 1 {
        vec![lay.len, n]
    } else {
        let mut shape = vec![n];
        shape.extend_from_slice(&lay.shape[lay.shape.len() - lay.dim..]);
        shape
    }
}

/// The units `ids` of `src` (laid out as `lay`) as a compact array of `compact_shape`.
fn gather<T: Real>(src: &[T], lay: &Layout, ids: &[usize]) -> Vec<T> {
    let n = ids.len();
    let mut dst = vec![T::default(); n * lay.len];
    if lay.dim == 1 {
        // Row k holds element k of every spectrum.
        dst.par_chunks_mut(n).enumerate().for_each(|(k, row)| {
            let from = &src[k * lay.units..(k + 1) * lay.units];
            row.iter_mut().zip(ids).for_each(|(d, &u)| *d = from[u]);
        });
    } else {
        dst.par_chunks_mut(lay.len)
            .zip(ids.par_iter())
            .for_each(|(d, &u)| d.copy_from_slice(&src[u * lay.len..(u + 1) * lay.len]));
    }
    dst
}

/// Write the compact array `sub` of units `ids` back into `dst` (laid out as `lay`).
fn scatter<T: Real>(sub: &[T], dst: &mut [T], lay: &Layout, ids: &[usize]) {
    let n = ids.len();
    if lay.dim == 1 {
        dst.par_chunks_mut(lay.units)
            .enumerate()
            .for_each(|(k, row)| {
                let from = &sub[k * n..(k + 1) * n];
                ids.iter().zip(from).for_each(|(&u, &v)| row[u] = v);
            });
    } else {
        let mut pos = vec![usize::MAX; lay.units];
        ids.iter().enumerate().for_each(|(j, &u)| pos[u] = j);
        dst.par_chunks_mut(lay.len).enumerate().for_each(|(u, d)| {
            if pos[u] != usize::MAX {
                d.copy_from_slice(&sub[pos[u] * lay.len..(pos[u] + 1) * lay.len]);
            }
        });
    }
}

fn engine<'a, T: Real>(input: &'a [T], out: &'a mut [T], plan: &'a Plan) -> Cpu<'a, T> {
    let n = input.len();
    Cpu {
        input,
        out,
        plan,
        c: vec![T::default(); n],
        s: vec![T::default(); n],
        w: vec![T::default(); n],
    }
}

/// Reconstruct on the current rayon pool. Units (spectra, maps) that have converged are
/// dropped from the working arrays as soon as at most half of them still iterate.
pub fn run<T: Real>(
    input: &[T],
    plan: &Plan,
    out: &mut [T],
    progress: &mut dyn FnMut(Progress) -> Result<()>,
) -> Result<Outcome> {
    out.par_iter_mut().for_each(|o| *o = T::default());
    let lay = &plan.layout;
    let mut st = {
        let mut e = engine(input, &mut *out, plan);
        let mut st = State::start(&mut e, plan)?;
        while st.any_active() {
            st.iterate(&mut e, plan, progress)?;
            if worth_compacting(&st) {
                break;
            }
        }
        st
    };
    while st.any_active() {
        let keep = st.active_units();
        st.restrict(&keep);
        let ids = st.global().to_vec();
        let sub_plan = Plan::new(&compact_shape(lay, ids.len()), &plan.params)?;
        let sub_in = gather(input, lay, &ids);
        let mut sub_out = gather(out, lay, &ids);
        {
            let mut e = engine(&sub_in, &mut sub_out, &sub_plan);
            while st.any_active() {
                st.iterate(&mut e, &sub_plan, progress)?;
                if worth_compacting(&st) {
                    break;
                }
            }
        }
        scatter(&sub_out, out, lay, &ids);
    }
    let outcome = st.outcome;
    // Blank voxels pass through unchanged.
    out.par_chunks_mut(GRAIN)
        .zip(input.par_chunks(GRAIN))
        .for_each(|(o, x)| {
            for (o, &x) in o.iter_mut().zip(x) {
                if !x.to_f64().is_finite() {
                    *o = x;
                }
            }
        });
    Ok(outcome)
}
