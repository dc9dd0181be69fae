//! Admission of GPU calls: the one rule that lets several threads call the GPU engine at once
//! (issue 19).
//!
//! A call from Python is admitted to its GPU(s) on the thread that made it, with the GIL
//! released and Ctrl-C still polled (`py::errors::compute_on`), before its job enters
//! skyconv's rayon pool; the admission is released when the job has ended. So no job in the
//! pool ever waits for a GPU. (It used to: every engine took a per-GPU mutex on the pool worker
//! running the call; when that worker waited in a parallel section it could steal a second
//! thread's queued GPU call, which then blocked on the mutex on top of the holder's own stack —
//! a deadlock seen as Dask GPU workers with two threads that made no progress.)
//!
//! Engines open a [`Section`] (`Gpu::exclusive`) around their device work:
//! - on a thread that carries the call's [`Ticket`] for that GPU (the call's job, and the
//!   threads a call spawns that `enter` its ticket), the section only orders the call's own
//!   threads on the GPU (a split SHT listing one GPU twice runs its blocks one after the
//!   other); a second section on the same thread is an error, not a hang;
//! - on a thread with no ticket outside the pool (Rust callers, tests), the section admits the
//!   thread itself first, waiting there;
//! - on a pool worker with no ticket it is an error: the binding did not admit its call.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::backend::{cancel, threads};
use crate::error::{Error, Result};

/// How often a thread waiting for its admission polls `poll` (Ctrl-C for Python calls).
const POLL: Duration = Duration::from_millis(20);

#[derive(Default)]
struct State {
    /// The id of the call admitted to this GPU, if any.
    call: Option<u64>,
    /// The thread inside an engine section of that call, if any.
    section: Option<ThreadId>,
}

/// One GPU's admission state (no CUDA context needed: it is keyed by ordinal only).
#[derive(Default)]
struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

static GATES: Mutex<BTreeMap<u32, Arc<Gate>>> = Mutex::new(BTreeMap::new());

/// Per GPU ordinal since the last [`take_stats`]: calls admitted, seconds their threads waited
/// for the GPU, seconds the GPU was admitted to a call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    pub calls: u64,
    pub waited_s: f64,
    pub admitted_s: f64,
}

static STATS: Mutex<BTreeMap<u32, Stats>> = Mutex::new(BTreeMap::new());

fn record(ordinal: u32, f: impl FnOnce(&mut Stats)) {
    f(STATS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(ordinal)
        .or_default());
}

/// The statistics by GPU ordinal, cleared when `reset`.
pub fn take_stats(reset: bool) -> BTreeMap<u32, Stats> {
    let mut st = STATS.lock().unwrap_or_else(|e| e.into_inner());
    if reset {
        std::mem::take(&mut *st)
    } else {
        st.clone()
    }
}
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn gate(ordinal: u32) -> Arc<Gate> {
    GATES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(ordinal)
        .or_default()
        .clone()
}

/// What a call was admitted to (cheap to clone): carried to every thread that runs the call's
/// engine sections with [`enter`].
#[derive(Clone, Debug)]
pub struct Ticket(Arc<(u64, Vec<u32>)>);

impl Ticket {
    fn id(&self) -> u64 {
        self.0 .0
    }

    /// The GPU ordinals of the admission (ascending, distinct).
    pub fn ordinals(&self) -> &[u32] {
        &self.0 .1
    }

    fn covers(&self, ordinal: u32) -> bool {
        self.ordinals().contains(&ordinal)
    }
}

/// The GPUs of an admitted call: theirs until dropped.
pub struct Admission {
    ticket: Ticket,
    gates: Vec<Arc<Gate>>,
    /// When each gate was taken.
    since: Vec<Instant>,
}

impl Admission {
    pub fn ticket(&self) -> Ticket {
        self.ticket.clone()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        for ((g, t), &o) in self
            .gates
            .iter()
            .zip(&self.since)
            .zip(self.ticket.ordinals())
        {
            let held = t.elapsed().as_secs_f64();
            record(o, |s| s.admitted_s += held);
            let mut st = g.lock();
            if st.call == Some(self.ticket.id()) {
                st.call = None;
            }
            drop(st);
            g.changed.notify_all();
        }
    }
}

fn sorted(ordinals: &[u32]) -> Vec<u32> {
    let mut o = ordinals.to_vec();
    o.sort_unstable();
    o.dedup();
    o
}

/// Admit a call to GPUs `ordinals` on this thread, waiting while another call has any of
/// them (in ascending order, so two calls wanting several GPUs cannot wait on each other);
/// `poll` runs before each 20 ms of waiting and its error ends the wait (nothing stays admitted).
pub fn admit(ordinals: &[u32], mut poll: impl FnMut() -> Result<()>) -> Result<Admission> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let ordinals = sorted(ordinals);
    let mut adm = Admission {
        ticket: Ticket(Arc::new((id, ordinals.clone()))),
        gates: Vec::with_capacity(ordinals.len()),
        since: Vec::with_capacity(ordinals.len()),
    };
    for &o in &ordinals {
        let g = gate(o);
        let t0 = Instant::now();
        {
            let mut st = g.lock();
            while st.call.is_some() {
                drop(st);
                poll()?; // on an error `adm` releases the GPUs taken so far
                st = g.lock();
                if st.call.is_some() {
                    st = g
                        .changed
                        .wait_timeout(st, POLL)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
            st.call = Some(id);
        }
        let waited = t0.elapsed().as_secs_f64();
        record(o, |s| {
            s.calls += 1;
            s.waited_s += waited;
        });
        adm.gates.push(g);
        adm.since.push(Instant::now());
    }
    Ok(adm)
}

/// [`admit`] without waiting: None when another call has one of the GPUs.
pub fn try_admit(ordinals: &[u32]) -> Option<Admission> {
    admit(ordinals, || Err(Error::Cancelled)).ok()
}

thread_local! {
    static CURRENT: RefCell<Option<Ticket>> = const { RefCell::new(None) };
}

/// The ticket of the call running on this thread, if it was admitted to a GPU.
pub fn current() -> Option<Ticket> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Makes `ticket` this thread's until dropped (the previous one comes back).
pub struct Entered(Option<Ticket>);

pub fn enter(ticket: Option<Ticket>) -> Entered {
    Entered(CURRENT.with(|c| c.replace(ticket)))
}

impl Drop for Entered {
    fn drop(&mut self) {
        let prev = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

/// An engine's device work on one GPU (see the module's text); ends when dropped.
pub struct Section {
    gate: Arc<Gate>,
    // Dropped after `Drop::drop` below: the section ends before a self-admission does.
    _entered: Option<Entered>,
    _own: Option<Admission>,
}

impl Drop for Section {
    fn drop(&mut self) {
        self.gate.lock().section = None;
        self.gate.changed.notify_all();
    }
}

/// Open an engine section on GPU `ordinal` on this thread (the rule in the module's text).
pub fn section(ordinal: u32) -> Result<Section> {
    let ticket = current().filter(|t| t.covers(ordinal));
    let (id, own, entered) = match ticket {
        Some(t) => (t.id(), None, None),
        None if threads::in_pool() => {
            return Err(Error::Internal(format!(
                "cuda:{ordinal} was used by a job on skyconv's thread pool that was not \
                 admitted to it (the binding must pass its device to compute_on: a pool \
                 worker never waits for a GPU)"
            )))
        }
        None => {
            let a = admit(&[ordinal], cancel::check)?;
            let entered = enter(Some(a.ticket()));
            (a.ticket().id(), Some(a), Some(entered))
        }
    };
    let gate = gate(ordinal);
    let me = std::thread::current().id();
    let mut st = gate.lock();
    debug_assert_eq!(
        st.call,
        Some(id),
        "a section of a call not admitted to cuda:{ordinal}"
    );
    loop {
        match st.section {
            None => break,
            Some(t) if t == me => {
                return Err(Error::device(format!(
                    "cuda:{ordinal} is already in use by the skyconv call this thread is \
                     running (a skyconv call made from a progress callback cannot use the \
                     GPU of the call that reports; use another device or call it after that \
                     call returns)"
                )))
            }
            Some(_) => {
                st = gate.changed.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
    st.section = Some(me);
    drop(st);
    Ok(Section {
        gate,
        _entered: entered,
        _own: own,
    })
}
