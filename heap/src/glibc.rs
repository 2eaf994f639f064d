//! glibc's figures (`mallinfo2`), when no other allocator is preloaded.

use super::{Allocator, HeapStats};

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn stats() -> Option<HeapStats> {
    // SAFETY: mallinfo2 takes no arguments, only reads the allocator's statistics under its
    // own locks and returns a plain struct by value (glibc ≥ 2.33).
    #[expect(unsafe_code, reason = "FFI into glibc, ADR 0009")]
    let info = unsafe { libc::mallinfo2() };
    Some(HeapStats {
        allocator: Allocator::Glibc,
        in_use: info.uordblks + info.hblkhd,
        free: info.fordblks,
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn stats() -> Option<HeapStats> {
    None
}
