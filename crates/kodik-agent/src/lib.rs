//! The reference agent loop (work in progress).
