//! Error -> Python exception. The exception classes live in `skyconv/_errors.py` (so that
//! `ShapeError` can subclass both `SkyconvError` and `ValueError`); each is looked up once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::backend::cancel::{self, Token};
use crate::backend::cuda::admit;
use crate::backend::Device;
use crate::error::Error;

/// The module that defines skyconv's exception classes.
const MODULE: &str = "skyconv._errors";

/// One of skyconv's exception classes, looked up in `skyconv._errors` on its first raise and
/// cached for the life of the process.
struct Class {
    name: &'static str,
    cell: PyOnceLock<Py<PyType>>,
}

impl Class {
    const fn new(name: &'static str) -> Self {
        Class {
            name,
            cell: PyOnceLock::new(),
        }
    }

    /// The exception `msg` of this class (a RuntimeError if the class cannot be imported; a
    /// failed import is not cached, so the next raise tries again).
    fn err(&self, py: Python<'_>, msg: String) -> PyErr {
        match self.cell.import(py, MODULE, self.name) {
            Ok(cls) => PyErr::from_type(cls.clone(), msg),
            Err(_) => PyRuntimeError::new_err(msg),
        }
    }
}

static SHAPE_ERROR: Class = Class::new("ShapeError");
static ARGUMENT_ERROR: Class = Class::new("ArgumentError");
static ARGUMENT_TYPE_ERROR: Class = Class::new("ArgumentTypeError");
static HOST_MEMORY_ERROR: Class = Class::new("HostMemoryError");
static DEVICE_ERROR: Class = Class::new("DeviceError");
static GPU_MEMORY_ERROR: Class = Class::new("GpuMemoryError");
static CUDA_ERROR: Class = Class::new("CudaError");
static INTERNAL_ERROR: Class = Class::new("InternalError");

/// The Python exception for a core error: every kind is one of skyconv's classes (all derive
/// from `SkyconvError`, and from `ValueError` / `TypeError` / `MemoryError` where the builtin
/// applies), so that nothing the core raises is a plain builtin.
pub fn to_pyerr(e: Error) -> PyErr {
    Python::attach(|py| match e {
        Error::Shape(m) => SHAPE_ERROR.err(py, m),
        Error::Value(m) => ARGUMENT_ERROR.err(py, m),
        Error::Type(m) => ARGUMENT_TYPE_ERROR.err(py, m),
        e @ Error::HostMemory { .. } => HOST_MEMORY_ERROR.err(py, e.to_string()),
        Error::Device(m) => DEVICE_ERROR.err(py, m),
        Error::GpuMemory(m) => GPU_MEMORY_ERROR.err(py, m),
        Error::Cuda(m) => CUDA_ERROR.err(py, m),
        // Reached only when Rust code cancelled a call without a Python exception behind it.
        e @ Error::Cancelled => PyKeyboardInterrupt::new_err(e.to_string()),
        e @ Error::Internal(_) => INTERNAL_ERROR.err(py, e.to_string()),
    })
}

/// `skyconv.ArgumentError(msg)` (a `ValueError`): a bad argument value found in a binding.
pub fn value_err(msg: impl Into<String>) -> PyErr {
    to_pyerr(Error::value(msg))
}

/// `skyconv.ArgumentTypeError(msg)` (a `TypeError`): an argument of the wrong type or dtype.
pub fn type_err(msg: impl Into<String>) -> PyErr {
    to_pyerr(Error::type_(msg))
}

/// The KeyboardInterrupt of a call stopped through its `CancelScope` (a worker thread's part
/// of work whose main thread got Ctrl-C, or whose other part failed).
const SCOPE_CANCELLED: &str = "cancelled: the work this call belongs to was interrupted";

/// How often the calling thread looks for Ctrl-C while a call runs.
const POLL: Duration = Duration::from_millis(20);

/// One call from Python: its cancel token and the Python exception that ended it early
/// (KeyboardInterrupt from Ctrl-C, or whatever a progress callback raised).
#[derive(Default)]
pub struct Call {
    token: Token,
    raised: Mutex<Option<PyErr>>,
}

impl Call {
    pub fn new() -> Self {
        Call::default()
    }

    /// End the call with `e` (the first exception wins) and tell the engine to stop.
    pub fn fail(&self, e: PyErr) {
        let mut slot = self.raised.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.token.cancel();
    }

    /// Call a progress callback with `args` (from any thread). Its exception ends the call:
    /// the engine stops at its next poll and the binding re-raises the exception unchanged —
    /// the one rule for every function that takes a callback. Returns `Err(Cancelled)` then.
    pub fn report<A>(&self, cb: &Py<PyAny>, args: A) -> crate::Result<()>
    where
        A: for<'py> pyo3::call::PyCallArgs<'py>,
    {
        if self.token.is_set() {
            return Err(Error::Cancelled);
        }
        Python::attach(|py| match cb.call1(py, args) {
            Ok(_) => Ok(()),
            Err(e) => {
                self.fail(e);
                Err(Error::Cancelled)
            }
        })
    }

    fn take_raised(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Run `f`, turning a panic into `Error::Internal`.
fn catching<T>(f: impl FnOnce() -> crate::Result<T>) -> crate::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Internal(format!("a Rust panic was caught: {what}")))
        }
    }
}

/// The GPUs a call is admitted to before its job enters the pool (`backend::cuda::admit`):
/// none for a CPU call, the device's ordinal for `Device::Cuda`, or a list (a split SHT).
pub struct Gpus(Vec<u32>);

impl From<Device> for Gpus {
    fn from(d: Device) -> Self {
        match d {
            Device::Cpu => Gpus(Vec::new()),
            Device::Cuda(n) => Gpus(vec![n]),
        }
    }
}

impl From<&[u32]> for Gpus {
    fn from(d: &[u32]) -> Self {
        Gpus(d.to_vec())
    }
}

/// Run `f` with the GIL released, inside skyconv's thread pool, turning errors and panics into
/// Python exceptions: a call that uses no GPU. Every binding that computes goes through here,
/// [`compute_on`] (a call on a device) or [`compute_in`] (a call with progress reports).
pub fn compute<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> crate::Result<T> + Send,
) -> PyResult<T> {
    compute_in(py, &Call::new(), Device::Cpu, f)
}

/// [`compute`] for a call on `gpus` (a `Device`, or a list of GPU ordinals): the call is
/// admitted to its GPUs on this thread — waiting there, GIL released, while another call has
/// one, Ctrl-C still polled — before `f` enters the pool, so no pool worker ever waits for a
/// GPU (issue 19). The engines' `Gpu::exclusive` refuses a pool job that was not admitted.
pub fn compute_on<T: Send>(
    py: Python<'_>,
    gpus: impl Into<Gpus>,
    f: impl FnOnce() -> crate::Result<T> + Send,
) -> PyResult<T> {
    compute_in(py, &Call::new(), gpus, f)
}

/// [`compute_on`] for a call whose progress callbacks go through `call.report`: `f` runs on a
/// worker of skyconv's pool with `call`'s token as its current token (and its GPU admission),
/// while this thread waits and looks for Ctrl-C every 20 ms. On Ctrl-C (or a raising callback)
/// the token is set, the engine stops at its next poll, its threads and buffers are released,
/// and the Python exception is raised here — whatever `f` returned.
pub fn compute_in<T: Send>(
    py: Python<'_>,
    call: &Call,
    gpus: impl Into<Gpus>,
    f: impl FnOnce() -> crate::Result<T> + Send,
) -> PyResult<T> {
    let Gpus(gpus) = gpus.into();
    let token = call.token.clone();
    // Scopes entered on this thread (`_core.CancelScope`): cancelling one stops this call.
    let scopes = super::scope::entered();
    let scope_cancelled = || scopes.iter().any(|t| t.is_set());
    if scope_cancelled() {
        return Err(PyKeyboardInterrupt::new_err(SCOPE_CANCELLED));
    }
    // Ctrl-C and cancelled scopes, while this thread waits (for a GPU, or for the job).
    let poll = || {
        if !token.is_set() {
            if scope_cancelled() {
                call.fail(PyKeyboardInterrupt::new_err(SCOPE_CANCELLED));
            } else if let Err(e) = Python::attach(|py| py.check_signals()) {
                call.fail(e);
            }
        }
        token.check()
    };
    let out = py.detach(|| {
        if crate::backend::threads::in_pool() {
            // Called back into from a worker (a callback that calls skyconv): run in place.
            // This thread must not wait for a GPU: it is the one the ticket's call runs on, or
            // it is a pool worker another call may need.
            let ticket = admit::current().filter(|t| gpus.iter().all(|g| t.ordinals().contains(g)));
            let own = match (&ticket, gpus.is_empty()) {
                (Some(_), _) | (None, true) => None,
                (None, false) => Some(admit::try_admit(&gpus).ok_or_else(|| {
                    Error::device(format!(
                        "a skyconv call made from a progress callback cannot wait for GPU(s)                          {gpus:?}, busy with another call; use another device or call it after                          the reporting call returns"
                    ))
                })?),
            };
            let _a = admit::enter(ticket.or_else(|| own.as_ref().map(|a| a.ticket())));
            let _g = cancel::enter(token.clone());
            return catching(f);
        }
        let admission = if gpus.is_empty() {
            None
        } else {
            Some(admit::admit(&gpus, poll)?)
        };
        let ticket = admission.as_ref().map(|a| a.ticket());
        let pool = crate::backend::threads::pool()?;
        let (tx, rx) = mpsc::sync_channel::<crate::Result<T>>(1);
        // The scope returns once the job has ended; `admission` is released after it.
        let out = pool.in_place_scope(|s| {
            let tok = token.clone();
            s.spawn(move |_| {
                let _a = admit::enter(ticket);
                let _g = cancel::enter(tok);
                let _ = tx.send(catching(f));
            });
            loop {
                match rx.recv_timeout(POLL) {
                    Ok(r) => return r,
                    Err(RecvTimeoutError::Timeout) => {
                        let _ = poll();
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(Error::Internal("the worker ended without a result".into()))
                    }
                }
            }
        });
        if out.is_err() || token.is_set() {
            crate::backend::cuda::settle(&gpus);
        } else {
            crate::backend::cuda::keep_again(&gpus);
        }
        out
    });
    if let Some(e) = call.take_raised() {
        return Err(e);
    }
    out.map_err(to_pyerr)
}
