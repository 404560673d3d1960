//! The loop guard (G15) as the three tools use it: a key naming the call, a fingerprint of
//! what it looked at, and the short answer for an unchanged repeat.

use kodik_core::{LoopGuardVerdict, Session, ToolOutput};

/// Asks the session whether this call is an unchanged repeat; `None` means "show fresh results".
pub(crate) fn check(session: &Session, key: &str, fingerprint: u64, what: &str) -> Option<ToolOutput> {
    match session.loop_guard(key, fingerprint) {
        LoopGuardVerdict::Fresh => None,
        LoopGuardVerdict::Unchanged { repeats } => {
            let times = if repeats == 1 { "once".to_string() } else { format!("{repeats} times") };
            Some(
                ToolOutput::text(format!(
                    "Unchanged since your last identical call ({what}); its earlier result still holds. \
                     This exact call was repeated {times} with nothing changed: use the earlier result, or change \
                     the arguments."
                ))
                .with_meta(serde_json::json!({ "unchanged": true, "repeats": repeats })),
            )
        }
    }
}
