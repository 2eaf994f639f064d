//! The process's allocator, and what it holds (docs/adr/0010-jemalloc-in-the-image.md).
//!
//! Every binary that links this crate (the operator, its tests, the bench) allocates through
//! jemalloc (`tikv-jemallocator`, built into the binary), so what a test or the bench measures
//! is what the image runs: no `LD_PRELOAD`, no library path, no symbol looked up at run time.
//! jemalloc sorts blocks by size class and purges the pages of empty slabs after a decay; its
//! background thread (the `background_threads` feature) does that on a timer, so an idle
//! operator gives back what thousands of passivated actors freed (glibc's allocator kept them:
//! ADR 0009's figures). [`stats`] tells what the operator uses from what the allocator keeps.

use std::ffi::{CStr, c_void};
use std::mem::size_of;

/// The global allocator of every binary linking this crate.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// What the allocator holds, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapStats {
    /// Which allocator answered.
    pub allocator: Allocator,
    /// Handed out to the program and not freed yet (`stats.allocated`).
    pub in_use: usize,
    /// Resident but not handed out: freed pages not yet purged and the allocator's own
    /// bookkeeping (`stats.resident` − `stats.allocated`).
    pub free: usize,
}

/// The allocator the process runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    /// jemalloc, linked as the global allocator.
    Jemalloc,
}

impl Allocator {
    /// Its name, as logged and as the `allocator` label of `heap_bytes`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Jemalloc => "jemalloc",
        }
    }
}

/// The allocator's figures; `None` if jemalloc does not answer (it always does when linked).
#[must_use]
pub fn stats() -> Option<HeapStats> {
    // The statistics are a snapshot that advancing the epoch refreshes.
    advance_epoch()?;
    let allocated = read::<usize>(c"stats.allocated")?;
    let resident = read::<usize>(c"stats.resident")?;
    Some(HeapStats {
        allocator: Allocator::Jemalloc,
        in_use: allocated,
        free: resident.saturating_sub(allocated),
    })
}

/// Whether jemalloc's background purging thread is on (the build enables it by default).
#[must_use]
pub fn background_purge() -> bool {
    read::<bool>(c"background_thread").unwrap_or(false)
}

/// Reads the value of a read-only `mallctl` name whose C type is `T` (`size_t` is `usize`,
/// `bool` is `bool`).
#[allow(unsafe_code)]
fn read<T: Copy + Default>(name: &CStr) -> Option<T> {
    let mut value = T::default();
    let mut len = size_of::<T>();
    // SAFETY: `name` is NUL-terminated; `value` is a live, writable `T` and `len` its size,
    // which is the size jemalloc writes for the names read here (checked after the call:
    // jemalloc refuses with EINVAL rather than write past `len`); no new value is passed.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            (&raw mut value).cast::<c_void>(),
            &raw mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && len == size_of::<T>()).then_some(value)
}

/// Refreshes the snapshot the `stats.*` names read (`epoch`, a `uint64_t`: writing any value
/// advances it).
#[allow(unsafe_code)]
fn advance_epoch() -> Option<()> {
    let mut new: u64 = 1;
    // SAFETY: `epoch` takes a `uint64_t`: `new` is a live `u64` and the length is its size;
    // the old value is not asked for (null, null).
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"epoch".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            (&raw mut new).cast::<c_void>(),
            size_of::<u64>(),
        )
    };
    (rc == 0).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rust's own allocations go through jemalloc: holding ~10 MiB shows in `in_use`, and
    /// freeing it takes it out again.
    #[test]
    fn rust_allocations_are_jemallocs() {
        let before = stats().expect("jemalloc answers");
        assert_eq!(before.allocator, Allocator::Jemalloc);
        let held: Vec<Vec<u8>> = (0..10_000u32).map(|i| vec![i as u8; 1024]).collect();
        let during = stats().expect("jemalloc answers");
        assert!(
            during.in_use >= before.in_use + (9 << 20),
            "in use went from {} to {} while holding ~10 MiB",
            before.in_use,
            during.in_use
        );
        drop(held);
        let after = stats().expect("jemalloc answers");
        assert!(
            after.in_use + (9 << 20) <= during.in_use,
            "in use went from {} to {} after freeing ~10 MiB",
            during.in_use,
            after.in_use
        );
    }

    /// The image ran jemalloc with `background_thread:true`; the built-in default keeps it.
    #[test]
    fn freed_pages_are_purged_in_the_background() {
        assert!(background_purge(), "jemalloc's background thread is off");
    }
}
