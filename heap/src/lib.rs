//! What the process's allocator holds, in use and freed-but-kept
//! (docs/adr/0009-heap-figures-from-glibc.md, docs/adr/0010-jemalloc-in-the-image.md).
//!
//! The image runs the operator with jemalloc preloaded (`LD_PRELOAD`), which purges freed
//! pages after a decay; a binary run without it uses glibc's allocator, whose `free` gives
//! memory back only from the top of a heap, so after a wave of passivation the RSS stays at
//! its peak while the operator uses a fraction of it. These figures tell the operator's need
//! from the allocator's retention under either. The FFI calls are the workspace's only unsafe
//! code; elsewhere (musl, macOS) there are no figures.

mod glibc;
mod jemalloc;

/// What the allocator holds, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapStats {
    /// Which allocator answered.
    pub allocator: Allocator,
    /// Handed out to the program and not freed yet.
    pub in_use: usize,
    /// Freed (or the allocator's own bookkeeping) and still resident: what the allocator keeps.
    pub free: usize,
}

/// The allocator the process runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    /// jemalloc, preloaded (`LD_PRELOAD`) as the image does: `stats.allocated`, and
    /// `stats.resident` minus it.
    Jemalloc,
    /// glibc's own malloc: `mallinfo2`'s `uordblks + hblkhd` and `fordblks`.
    Glibc,
}

impl Allocator {
    /// Its name, as logged.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Jemalloc => "jemalloc",
            Self::Glibc => "glibc",
        }
    }
}

/// The allocator's figures; `None` where they cannot be asked.
#[must_use]
pub fn stats() -> Option<HeapStats> {
    jemalloc::stats().or_else(glibc::stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small blocks freed below a block still held (so not at the heap's top, where `free`
    /// would trim by itself) leave `in_use`; under glibc they show up as `free`.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_blocks_leave_in_use() {
        let blocks: Vec<Vec<u8>> = (0..20_000u32).map(|i| vec![i as u8; 1024]).collect();
        let above = vec![1u8; 1024];
        let before = stats().expect("the allocator answers");
        drop(blocks);
        let after = stats().expect("the allocator answers");
        assert!(
            after.in_use + (15 << 20) <= before.in_use,
            "in use went from {} to {}",
            before.in_use,
            after.in_use
        );
        if after.allocator == Allocator::Glibc {
            assert!(
                after.free >= before.free + (15 << 20),
                "free went from {} to {} after freeing ~20 MiB",
                before.free,
                after.free
            );
        }
        assert_eq!(above[1023], 1);
    }

    /// Where the image's jemalloc is (Debian's `libjemalloc2`; `e2e/bootstrap.sh` installs it).
    const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

    /// Run with jemalloc preloaded, as the image runs the operator, the figures are jemalloc's
    /// and follow what the program holds: this test runs itself again under `LD_PRELOAD`.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    fn a_preloaded_jemalloc_answers() {
        if std::env::var_os("TERDUT_HEAP_CHILD").is_some() {
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
            return;
        }
        assert!(
            std::path::Path::new(JEMALLOC).exists(),
            "{JEMALLOC} is missing: apt-get install libjemalloc2 (e2e/bootstrap.sh does)"
        );
        let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "--exact",
                "tests::a_preloaded_jemalloc_answers",
                "--nocapture",
            ])
            .env("TERDUT_HEAP_CHILD", "1")
            .env("LD_PRELOAD", JEMALLOC)
            .output()
            .expect("the test binary runs again");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "under jemalloc: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
