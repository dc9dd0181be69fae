//! CPU engine: rayon. Five arrays of the data's size live during a call: the input, the
//! output, the smooth array c and two work arrays (the filter passes ping-pong through them;
//! one ends up holding the wavelet coefficients, later the residual).

use rayon::prelude::*;

use super::unitstats::unit_stat;
use super::{drive, Buf, Engine, Outcome, Plan, Progress, Stat, UnitCursor};
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

    fn start(&mut self) -> Result<()> {
        self.c
            .par_chunks_mut(GRAIN)
            .zip(self.input.par_chunks(GRAIN).zip(self.out.par_chunks(GRAIN)))
            .for_each(|(c, (x, o))| {
                for ((c, &x), &o) in c.iter_mut().zip(x).zip(o.iter()) {
                    *c = if x.to_f64().is_finite() {
                        sub(x, o)
                    } else {
                        T::default()
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
                        *w = T::from_f64(f64::NAN);
                        *c = T::default();
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

/// Reconstruct on the current rayon pool.
pub fn run<T: Real>(
    input: &[T],
    plan: &Plan,
    out: &mut [T],
    progress: &mut dyn FnMut(Progress) -> Result<()>,
) -> Result<Outcome> {
    let n = input.len();
    out.par_iter_mut().for_each(|o| *o = T::default());
    let mut e = Cpu {
        input,
        out: &mut *out,
        plan,
        c: vec![T::default(); n],
        s: vec![T::default(); n],
        w: vec![T::default(); n],
    };
    let outcome = drive(&mut e, plan, progress)?;
    drop(e);
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
