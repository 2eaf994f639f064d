//! jemalloc's figures, when it is preloaded (the image, ADR 0010): its `mallctl` is looked up
//! in the process's symbols, so the binary neither links nor needs it.

use super::HeapStats;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    use std::ffi::{CStr, c_char, c_int, c_void};
    use std::sync::OnceLock;

    use super::HeapStats;
    use crate::Allocator;

    /// `int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)`.
    type Mallctl =
        unsafe extern "C" fn(*const c_char, *mut c_void, *mut usize, *mut c_void, usize) -> c_int;

    /// jemalloc's `mallctl`, if the process has one; looked up once.
    fn mallctl() -> Option<Mallctl> {
        static FOUND: OnceLock<Option<Mallctl>> = OnceLock::new();
        *FOUND.get_or_init(|| {
            // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only searches the
            // loaded objects' symbol tables; a null result means absent.
            #[expect(unsafe_code, reason = "FFI into the dynamic loader, ADR 0010")]
            let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mallctl".as_ptr()) };
            // SAFETY: a symbol named `mallctl` in a process is jemalloc's, whose C signature
            // is `Mallctl` (jemalloc 5's documented API).
            #[expect(unsafe_code, reason = "FFI into jemalloc, ADR 0010")]
            (!sym.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Mallctl>(sym) })
        })
    }

    /// Reads the `size_t` statistic `name`.
    fn read(ctl: Mallctl, name: &CStr) -> Option<usize> {
        let mut value: usize = 0;
        let mut len = std::mem::size_of::<usize>();
        // SAFETY: `name` is NUL-terminated; `oldp`/`oldlenp` point at a `size_t` and its size,
        // which is what the `stats.*` entries read here are; nothing is written (`newp` null).
        #[expect(unsafe_code, reason = "FFI into jemalloc, ADR 0010")]
        let rc = unsafe {
            ctl(
                name.as_ptr(),
                (&raw mut value).cast(),
                &raw mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0).then_some(value)
    }

    pub fn stats() -> Option<HeapStats> {
        let ctl = mallctl()?;
        // The statistics are a snapshot refreshed by writing `epoch`.
        let mut epoch: u64 = 1;
        // SAFETY: `epoch` takes a `uint64_t` as the new value; no old value is read.
        #[expect(unsafe_code, reason = "FFI into jemalloc, ADR 0010")]
        let rc = unsafe {
            ctl(
                c"epoch".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                (&raw mut epoch).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if rc != 0 {
            return None;
        }
        let allocated = read(ctl, c"stats.allocated")?;
        let resident = read(ctl, c"stats.resident")?;
        Some(HeapStats {
            allocator: Allocator::Jemalloc,
            in_use: allocated,
            free: resident.saturating_sub(allocated),
        })
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub use imp::stats;

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn stats() -> Option<HeapStats> {
    None
}
