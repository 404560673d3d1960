//! Stopping a conversion nobody waits for any more (W2, W4).
//!
//! A conversion runs on a thread of its own, and a thread cannot be killed. When the call that
//! started it has already answered — its time limit passed, or it was cancelled — the caller
//! raises the conversion's [`Stop`] flag, and the converter's own loops (the chunked parse, the
//! scan and the copy of the tree, htmd's walk, each PDF character) reach a [`checkpoint`] soon
//! after and end the work there. Before, the thread converted on to the end, a core busy for
//! minutes after the error, and `kodik serve` could not exit until it finished.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A flag shared between a conversion and whoever waits for it.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

/// A conversion ended at a [`checkpoint`] because its [`Stop`] was raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the conversion was stopped: nobody waits for it any more")
    }
}

thread_local! {
    /// The flag of the conversion running on this thread, if any.
    static CURRENT: RefCell<Option<Stop>> = const { RefCell::new(None) };
}

impl Stop {
    /// A flag not raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the conversion to end at its next checkpoint.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Runs `f` on this thread with this flag as the one its checkpoints read; a checkpoint
    /// reached after [`stop`](Self::stop) ends `f` there with `Err(Stopped)`. A real panic in
    /// `f` goes on unwinding to the caller's handler.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> Result<T, Stopped> {
        let outer = CURRENT.with(|c| c.replace(Some(self.clone())));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        CURRENT.with(|c| *c.borrow_mut() = outer);
        match result {
            Ok(v) => Ok(v),
            Err(payload) if payload.is::<Stopped>() => Err(Stopped),
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }
}

/// Whether the conversion running on this thread was asked to stop.
pub fn stopped() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(Stop::is_stopped))
}

/// Ends the conversion running on this thread when its [`Stop`] was raised: unwinds to
/// [`Stop::run`] (without the panic hook: this is no bug to report). Does nothing outside one.
///
/// Every document being built is dropped on the way out; the converter's state is all owned by
/// the conversion, so nothing half-changed outlives it.
pub fn checkpoint() {
    if stopped() {
        std::panic::resume_unwind(Box::new(Stopped));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn w4_a_raised_flag_ends_the_work_at_its_next_checkpoint_and_a_real_panic_still_unwinds() {
        let stop = Stop::new();
        let mut reached = 0;
        let r = stop.run(|| {
            for i in 0..10 {
                if i == 3 {
                    stop.stop();
                }
                checkpoint();
                reached = i;
            }
        });
        assert_eq!((r, reached), (Err(Stopped), 2));
        // Outside a run, a checkpoint does nothing, even with a raised flag around.
        checkpoint();
        assert!(!stopped());
        let panicked = std::panic::catch_unwind(|| Stop::new().run(|| panic!("a real bug")));
        assert!(panicked.is_err());
        assert_eq!(Stop::new().run(|| 7), Ok(7));
    }
}
