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
/// - a call on a folder ([`Resource::Tree`]) is ordered with the calls on the files below it:
///   a search waits for earlier changes of them and later changes wait for it; a call that may
///   change them in ways it cannot name (a shell command) waits for every earlier call on them,
///   and later changes of them wait for it. Later reads and searches, and other such calls, do
///   not: the model asked for them together, and they run while the command does (G1, G4 —
///   reads and shell commands start while the response streams — and S4, which sends a
///   command to the background once another call of its turn has finished);
/// - a call that may act on anything ([`register_barrier`](Self::register_barrier)) waits for
///   every earlier call, and every later call waits for it.
#[derive(Debug, Default)]
pub struct CallOrder {
    by_resource: HashMap<Resource, Access>,
    /// The calls on folders not known to have settled. Few per turn, so each new call is
    /// checked against all of them.
    trees: Vec<TreeCall>,
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

/// A call on the files below a folder.
#[derive(Debug)]
struct TreeCall {
    folder: Resource,
    /// It may change them (a shell command), not only read them (a search).
    changes: bool,
    done: CancellationToken,
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
        let mut trees = Vec::new();
        for r in reads {
            // A call that also writes the resource is ordered as a writer below.
            if writes.contains(&r) {
                continue;
            }
            if matches!(r, Resource::Tree(_)) {
                let changed = self.by_resource.iter().filter(|(file, _)| r.overlaps(file));
                before.extend(changed.filter_map(|(_, access)| access.writer.clone()));
                trees.push(TreeCall { folder: r, changes: false, done: done.clone() });
            } else {
                let access = self.by_resource.entry(r).or_default();
                access.readers.push(done.clone());
                before.extend(access.writer.clone());
            }
        }
        for r in writes {
            if matches!(r, Resource::Tree(_)) {
                // Ordered with every earlier call on its files except other calls like it.
                let touched = self.by_resource.iter().filter(|(file, _)| r.overlaps(file));
                for (_, access) in touched {
                    before.extend(access.readers.iter().cloned().chain(access.writer.clone()));
                }
                before
                    .extend(self.trees.iter().filter(|t| !t.changes && t.folder.overlaps(&r)).map(|t| t.done.clone()));
                trees.push(TreeCall { folder: r, changes: true, done: done.clone() });
            } else {
                before.extend(self.trees.iter().filter(|t| t.folder.overlaps(&r)).map(|t| t.done.clone()));
                let access = self.by_resource.entry(r).or_default();
                before.append(&mut access.readers);
                before.extend(access.writer.replace(done.clone()));
            }
        }
        self.trees.append(&mut trees);
        self.all.push(done.clone());
        before
    }

    /// Registers a call that may act on anything (a script calling other tools): it waits for
    /// every earlier call not yet settled, and every later call waits for it.
    pub fn register_barrier(&mut self, done: &CancellationToken) -> Vec<CancellationToken> {
        self.forget_settled();
        let before = std::mem::take(&mut self.all);
        self.by_resource.clear();
        self.trees.clear();
        self.barrier = Some(done.clone());
        self.all.push(done.clone());
        before
    }

    /// Calls that settled no longer order anything.
    fn forget_settled(&mut self) {
        self.by_resource.retain(|_, access| access.forget_settled());
        self.trees.retain(|t| !t.done.is_cancelled());
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

    fn tree(name: &str) -> Resource {
        Resource::Tree(PathBuf::from(name))
    }

    /// G2, G4: a search of a folder waits for earlier changes of files below it and a later
    /// change waits for the search; a shell command (may change any file) waits for every
    /// earlier call on files and later changes wait for it, but later reads and other shell
    /// commands run with it (G1, S4). Files outside the folder and other sessions are not held
    /// up.
    #[test]
    fn g2_g4_folder_calls_are_ordered_with_the_files_below_them() {
        let mut order = CallOrder::new();
        let edit = CancellationToken::new();
        assert!(order.register(vec![file("src/a")], vec![], &edit).is_empty());
        let grep = CancellationToken::new();
        let waits = order.register(vec![], vec![tree("/ws/src")], &grep);
        assert!(waits.len() == 1 && !waits[0].is_cancelled(), "the search waits for the edit below it");
        assert!(order.register(vec![], vec![tree("/ws/docs")], &CancellationToken::new()).is_empty());
        let later_edit = CancellationToken::new();
        assert_eq!(order.register(vec![file("src/b")], vec![], &later_edit).len(), 1, "waits for the search");
        assert!(order.register(vec![file("lib/c")], vec![], &CancellationToken::new()).is_empty());

        let shell = CancellationToken::new();
        let waits = order.register(vec![Resource::any_file()], vec![], &shell);
        assert!(waits.len() >= 3, "the shell waits for the edits and the search: {waits:?}");
        let shell2 = CancellationToken::new();
        let waits2 = order.register(vec![Resource::any_file()], vec![], &shell2);
        assert!(!waits2.contains(&shell), "shell commands run together");
        let read = order.register(vec![], vec![file("x")], &CancellationToken::new());
        assert!(read.is_empty(), "a read runs while the shell commands do (S4)");
        let edit_after = order.register(vec![file("x")], vec![], &CancellationToken::new());
        assert!(edit_after.contains(&shell) && edit_after.contains(&shell2), "a change after them waits for them");
        let browser = order.register(vec![Resource::Session("browser".into())], vec![], &CancellationToken::new());
        assert!(!browser.contains(&shell), "sessions are not files");
        for t in [&edit, &grep, &later_edit, &shell, &shell2] {
            t.cancel();
        }
        assert!(order.register(vec![file("src/a")], vec![tree("/ws/src")], &CancellationToken::new()).is_empty());
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
