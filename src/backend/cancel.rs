//! The one interrupt rule: every call from Python gets a cancel token (`py::errors::compute`
//! makes it and sets it when Ctrl-C arrives or a progress callback raises); the engines poll it
//! at chunk / row / ring-block boundaries (CPU) and between launches (GPU) and stop with
//! [`Error::Cancelled`]. The binding then raises the Python exception that ended the call.
//!
//! An engine takes the token once, on the thread the call entered it
//! (`let stop = cancel::current();`), and polls that handle inside its parallel loops: rayon
//! workers do not inherit the caller's thread-local state, and a worker may run jobs of several
//! calls. Polling is one relaxed atomic load.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A call's cancel flag (cheap to clone; all clones share the flag).
#[derive(Clone, Debug, Default)]
pub struct Token(Arc<AtomicBool>);

impl Token {
    pub fn new() -> Self {
        Token::default()
    }

    /// Ask the work to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the work should stop.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Whether `other` shares this token's flag.
    pub fn same(&self, other: &Token) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// `Err(Error::Cancelled)` once the call is cancelled.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if self.is_set() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Token>> = const { RefCell::new(None) };
}

/// The token of the call running on this thread (a token nobody cancels when none is set:
/// Rust callers and tests).
pub fn current() -> Token {
    CURRENT.with(|c| c.borrow().clone()).unwrap_or_default()
}

/// Poll the current thread's call (for code that runs on the thread the call entered).
#[inline]
pub fn check() -> Result<()> {
    CURRENT.with(|c| match c.borrow().as_ref() {
        Some(t) => t.check(),
        None => Ok(()),
    })
}

/// Makes `token` this thread's current token until dropped (the previous one comes back).
pub struct Entered(Option<Token>);

pub fn enter(token: Token) -> Entered {
    Entered(CURRENT.with(|c| c.borrow_mut().replace(token)))
}

impl Drop for Entered {
    fn drop(&mut self) {
        let prev = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_follows_enter_and_restores() {
        assert!(current().check().is_ok());
        let t = Token::new();
        {
            let _g = enter(t.clone());
            assert!(check().is_ok());
            t.cancel();
            assert!(matches!(check(), Err(Error::Cancelled)));
            assert!(current().is_set());
        }
        assert!(check().is_ok(), "the token is gone after the guard");
    }
}
