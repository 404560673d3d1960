//! [`CallOrder`]: which earlier calls a new call must wait for, so calls on one resource run in
//! the order they were made (G2) while unrelated calls run concurrently. The scheduler keeps
//! one per model turn, code mode one per script.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;

use crate::Resource;

/// The calls made so far and what each touches. A call registers as it is made, with a token
/// that is cancelled when it settles, and gets the tokens it must wait for:
/// - a mutation of a resource waits for every earlier call on it;
/// - a read of a resource waits only for the last mutation before it, so reads run together;
/// - a call that may act on anything ([`register_barrier`](Self::register_barrier)) waits for
///   every earlier call, and every later call waits for it.
#[derive(Debug, Default)]
pub struct CallOrder {
    by_resource: HashMap<Resource, Access>,
    /// Every call not known to have settled, for a barrier to wait for.
    all: Vec<CancellationToken>,
    /// The last barrier call, which every later call waits for.
    barrier: Option<CancellationToken>,
}

/// Who a later call on one resource must wait for.
#[derive(Debug, Default)]
struct Access {
    /// The last call that mutates the resource.
    writer: Option<CancellationToken>,
    /// The calls since that writer that only read the resource.
    readers: Vec<CancellationToken>,
}

impl Access {
    /// Drops settled calls; whether anything is left to wait for.
    fn forget_settled(&mut self) -> bool {
        self.readers.retain(|r| !r.is_cancelled());
        if self.writer.as_ref().is_some_and(CancellationToken::is_cancelled) {
            self.writer = None;
        }
        self.writer.is_some() || !self.readers.is_empty()
    }
}

impl CallOrder {
    /// No call made yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a call that mutates `writes` and only reads `reads`, settling when `done` is
    /// cancelled; returns the calls it must wait for.
    pub fn register(
        &mut self,
        writes: Vec<Resource>,
        reads: Vec<Resource>,
        done: &CancellationToken,
    ) -> Vec<CancellationToken> {
        self.forget_settled();
        let mut before: Vec<CancellationToken> = self.barrier.iter().cloned().collect();
        for r in reads {
            // A call that also writes the resource is ordered as a writer below.
            if !writes.contains(&r) {
                let access = self.by_resource.entry(r).or_default();
                access.readers.push(done.clone());
                before.extend(access.writer.clone());
            }
        }
        for r in writes {
            let access = self.by_resource.entry(r).or_default();
            before.append(&mut access.readers);
            before.extend(access.writer.replace(done.clone()));
        }
        self.all.push(done.clone());
        before
    }

    /// Registers a call that may act on anything (a script calling other tools): it waits for
    /// every earlier call not yet settled, and every later call waits for it.
    pub fn register_barrier(&mut self, done: &CancellationToken) -> Vec<CancellationToken> {
        self.forget_settled();
        let before = std::mem::take(&mut self.all);
        self.by_resource.clear();
        self.barrier = Some(done.clone());
        self.all.push(done.clone());
        before
    }

    /// Calls that settled no longer order anything.
    fn forget_settled(&mut self) {
        self.by_resource.retain(|_, access| access.forget_settled());
        self.all.retain(|t| !t.is_cancelled());
        if self.barrier.as_ref().is_some_and(CancellationToken::is_cancelled) {
            self.barrier = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(name: &str) -> Resource {
        Resource::File(PathBuf::from(format!("/ws/{name}")))
    }

    /// G2: a mutation waits for every earlier call on its file, a read only for the mutation
    /// before it; calls on other files wait for nothing.
    #[test]
    fn g2_same_file_calls_wait_in_order_and_others_do_not() {
        let mut order = CallOrder::new();
        let w1 = CancellationToken::new();
        assert!(order.register(vec![file("a")], vec![], &w1).is_empty());
        let r1 = CancellationToken::new();
        assert_eq!(order.register(vec![], vec![file("a")], &r1).len(), 1);
        let r2 = CancellationToken::new();
        assert_eq!(order.register(vec![], vec![file("a")], &r2).len(), 1, "reads run together");
        let w2 = CancellationToken::new();
        assert_eq!(order.register(vec![file("a")], vec![], &w2).len(), 3, "after w1, r1 and r2");
        let other = CancellationToken::new();
        assert!(order.register(vec![file("b")], vec![], &other).is_empty());
        // Settled calls are forgotten.
        w2.cancel();
        assert!(order.register(vec![file("a")], vec![], &CancellationToken::new()).is_empty());
    }

    /// G4: a barrier waits for every unsettled call, and every later call waits for it until it
    /// settles.
    #[test]
    fn g4_a_barrier_orders_every_call_around_it() {
        let mut order = CallOrder::new();
        let a = CancellationToken::new();
        order.register(vec![file("a")], vec![], &a);
        let done_early = CancellationToken::new();
        order.register(vec![], vec![file("c")], &done_early);
        done_early.cancel();
        let script = CancellationToken::new();
        let before = order.register_barrier(&script);
        assert_eq!(before.len(), 1, "only the unsettled call");
        let later = order.register(vec![], vec![file("b")], &CancellationToken::new());
        assert_eq!(later.len(), 1);
        script.cancel();
        assert!(later[0].is_cancelled(), "the later call waited for the script");
        assert!(order.register(vec![], vec![file("b")], &CancellationToken::new()).is_empty());
    }
}
