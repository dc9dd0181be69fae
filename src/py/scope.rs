//! `_core.CancelScope`: Ctrl-C for work that Python spreads over threads (issue 17). Only the
//! main thread sees SIGINT, so a call running in a worker thread cannot notice it; the thread
//! that does (or that sees the other part fail) cancels the scope, and every core call made
//! inside `with scope:` in any thread stops at its next poll with `KeyboardInterrupt`.

use std::cell::RefCell;

use pyo3::prelude::*;

use crate::backend::cancel::Token;

thread_local! {
    /// The scopes entered on this thread, innermost last.
    static ENTERED: RefCell<Vec<Token>> = const { RefCell::new(Vec::new()) };
}

/// The tokens of the scopes entered on the calling thread (polled by `errors::compute_in`).
pub fn entered() -> Vec<Token> {
    ENTERED.with(|e| e.borrow().clone())
}

/// A cancel flag shared by the core calls made inside ``with scope:`` on any thread.
#[pyclass(module = "skyconv._core", frozen)]
pub struct CancelScope {
    token: Token,
}

#[pymethods]
impl CancelScope {
    #[new]
    fn new() -> Self {
        CancelScope {
            token: Token::new(),
        }
    }

    /// Stop every core call running or started inside this scope (KeyboardInterrupt).
    fn cancel(&self) {
        self.token.cancel();
    }

    /// Whether :meth:`cancel` was called.
    #[getter]
    fn cancelled(&self) -> bool {
        self.token.is_set()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        ENTERED.with(|e| e.borrow_mut().push(slf.token.clone()));
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            if let Some(i) = e.iter().rposition(|t| t.same(&self.token)) {
                e.remove(i);
            }
        });
        false
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CancelScope>()
}
