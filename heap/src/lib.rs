//! What glibc's allocator holds, in use and freed-but-kept (docs/adr/0009-heap-figures-from-glibc.md).
//!
//! glibc's `free` gives memory back only from the top of a heap; freed blocks between live
//! ones stay resident. After a wave of passivation (thousands of actors stopping at once) the
//! RSS therefore stays at its peak while the operator uses a fraction of it. These figures tell
//! the two apart. The one call is the workspace's only unsafe code; on other platforms (musl,
//! macOS) there are no figures.

/// What the allocator holds, in bytes (glibc `mallinfo2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapStats {
    /// Handed out to the program and not freed yet (`uordblks + hblkhd`).
    pub in_use: usize,
    /// Freed and kept by the allocator (`fordblks`), resident unless the kernel reclaimed it.
    pub free: usize,
}

/// The allocator's figures; `None` where they cannot be asked.
#[must_use]
pub fn stats() -> Option<HeapStats> {
    imp::stats()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    use super::HeapStats;

    pub fn stats() -> Option<HeapStats> {
        // SAFETY: mallinfo2 takes no arguments, only reads the allocator's statistics under
        // its own locks and returns a plain struct by value (glibc ≥ 2.33).
        #[expect(unsafe_code, reason = "FFI into glibc, ADR 0009")]
        let info = unsafe { libc::mallinfo2() };
        Some(HeapStats {
            in_use: info.uordblks + info.hblkhd,
            free: info.fordblks,
        })
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub fn stats() -> Option<super::HeapStats> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small blocks freed below a block still held (so not at the heap's top, where `free`
    /// would trim by itself) move from `in_use` to `free`.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_blocks_move_from_in_use_to_free() {
        let blocks: Vec<Vec<u8>> = (0..20_000u32).map(|i| vec![i as u8; 1024]).collect();
        let above = vec![1u8; 1024];
        let before = stats().expect("glibc answers mallinfo2");
        drop(blocks);
        let after = stats().expect("glibc answers mallinfo2");
        assert!(
            after.free >= before.free + (15 << 20),
            "free went from {} to {} after freeing ~20 MiB",
            before.free,
            after.free
        );
        assert!(
            after.in_use + (15 << 20) <= before.in_use,
            "in use went from {} to {}",
            before.in_use,
            after.in_use
        );
        assert_eq!(above[1023], 1);
    }
}
