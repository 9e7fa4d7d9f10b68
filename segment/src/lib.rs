//! OS glue for the job segment: creating and mapping it (memfd or SysV) and
//! the shared futex. Everything inside the segment is `shm-layout`'s.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use fastpmi_codec::names::pool;

/// Which kind of memory backs the segment (`memPoolType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemPool {
    /// An anonymous memfd, inherited by the ranks (`memAnonMMAPfd`).
    AnonMmap,
    /// A SysV segment, attached by id (`memSYSVid`).
    Sysv,
}

impl MemPool {
    /// The `memPoolType` node-attribute value.
    pub fn attr(self) -> &'static str {
        match self {
            MemPool::AnonMmap => pool::ANON_MMAP,
            MemPool::Sysv => pool::SYSV,
        }
    }

    /// A `memPoolType` value, or `memfd` (the command line's other name
    /// for an anonymous memfd).
    pub fn parse(s: &str) -> Option<MemPool> {
        match s {
            pool::ANON_MMAP | "memfd" => Some(MemPool::AnonMmap),
            pool::SYSV => Some(MemPool::Sysv),
            _ => None,
        }
    }
}

enum Backing {
    Memfd { fd: OwnedFd, map: memmap2::MmapMut },
    Sysv { id: i32, addr: *mut u8 },
}

/// A mapped job segment.
pub struct Mapping {
    backing: Backing,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access to its contents
// goes through shm-layout's atomics. The raw SysV address is only a base.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` hands out only the base pointer and length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Create a zero-filled segment of `len` bytes, mode 0600.
    pub fn create(pool: MemPool, len: usize) -> io::Result<Mapping> {
        match pool {
            MemPool::AnonMmap => {
                use rustix::fs::{memfd_create, MemfdFlags};
                // CLOEXEC: ranks get the fd on purpose (made inheritable in
                // the child only), nothing else the launcher runs does.
                let fd = memfd_create("fastpmi-job", MemfdFlags::CLOEXEC)?;
                rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))?;
                rustix::fs::ftruncate(&fd, len as u64)?;
                let file = std::fs::File::from(fd);
                // SAFETY: the memfd is private to this job; other processes
                // modify it only through shm-layout's atomics.
                let map = unsafe { memmap2::MmapMut::map_mut(&file)? };
                Ok(Mapping {
                    backing: Backing::Memfd {
                        fd: file.into(),
                        map,
                    },
                    len,
                })
            }
            MemPool::Sysv => {
                // SAFETY: plain syscall; IPC_PRIVATE always creates a new segment.
                let id = unsafe {
                    libc::shmget(
                        libc::IPC_PRIVATE,
                        len,
                        libc::IPC_CREAT | libc::IPC_EXCL | 0o600,
                    )
                };
                if id < 0 {
                    return Err(io::Error::last_os_error());
                }
                let m = Self::attach_sysv_id(id, len);
                // Mark it for removal at once: Linux still lets the ranks
                // attach by id while the launcher is attached, and the kernel
                // frees it when the last process detaches, however the
                // launcher ends (even SIGKILL).
                // SAFETY: plain syscall on the id just created.
                unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
                m
            }
        }
    }

    fn attach_sysv_id(id: i32, len: usize) -> io::Result<Mapping> {
        // SAFETY: shmat with a null address lets the kernel choose where.
        let addr = unsafe { libc::shmat(id, std::ptr::null(), 0) };
        if addr as isize == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            backing: Backing::Sysv {
                id,
                addr: addr.cast(),
            },
            len,
        })
    }

    /// Map an inherited memfd (`memAnonMMAPfd`).
    pub fn attach_fd(fd: RawFd) -> io::Result<Mapping> {
        // SAFETY: borrowing the number only to query it; fails if closed.
        let b = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
        let st = rustix::fs::fstat(b)?;
        let len = st.st_size as usize;
        let dup = rustix::io::fcntl_dupfd_cloexec(b, 3)?;
        let file = std::fs::File::from(dup);
        // The length from the fstat above: without it memmap2 stats the
        // file again (one syscall more in every rank's init).
        // SAFETY: shared job memory, accessed only through shm-layout atomics.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(&file)? };
        Ok(Mapping {
            backing: Backing::Memfd {
                fd: file.into(),
                map,
            },
            len,
        })
    }

    /// Attach a SysV segment by id (`memSYSVid`).
    pub fn attach_sysv(id: i32) -> io::Result<Mapping> {
        let mut ds: libc::shmid_ds = unsafe_zeroed_ds();
        // SAFETY: IPC_STAT writes into the local struct.
        if unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Self::attach_sysv_id(id, ds.shm_segsz)
    }

    pub fn as_ptr(&self) -> *mut u8 {
        match &self.backing {
            Backing::Memfd { map, .. } => map.as_ptr() as *mut u8,
            Backing::Sysv { addr, .. } => *addr,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn pool(&self) -> MemPool {
        match self.backing {
            Backing::Memfd { .. } => MemPool::AnonMmap,
            Backing::Sysv { .. } => MemPool::Sysv,
        }
    }

    /// The memfd number (in this process) for `memAnonMMAPfd`.
    pub fn fd(&self) -> Option<RawFd> {
        match &self.backing {
            Backing::Memfd { fd, .. } => Some(fd.as_raw_fd()),
            Backing::Sysv { .. } => None,
        }
    }

    /// The SysV id for `memSYSVid`.
    pub fn sysv_id(&self) -> Option<i32> {
        match self.backing {
            Backing::Sysv { id, .. } => Some(id),
            Backing::Memfd { .. } => None,
        }
    }
}

fn unsafe_zeroed_ds() -> libc::shmid_ds {
    // SAFETY: shmid_ds is a plain C struct for which all-zero is valid.
    unsafe { std::mem::zeroed() }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Backing::Sysv { addr, .. } = self.backing {
            // SAFETY: detaching the address this mapping attached.
            unsafe { libc::shmdt(addr.cast()) };
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds, through libc (glibc's vDSO call, set up
/// by the dynamic loader). rustix's own vDSO lookup costs a rank about 15 us
/// on its first call, in PMI init; this is a plain call.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail (and `t` stays 0 if it did).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// The CPU's time-stamp counter, where there is one to read without
/// memory (x86-64); `None` elsewhere.
pub fn read_tsc() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions in user mode on Linux x86-64
        // (the kernel does not set CR4.TSD).
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Whether ranks may stamp their phases with the TSC: only where the
/// kernel's own clock is the TSC, which it picks only when the counter is
/// constant and synchronised across CPUs.
pub fn tsc_stamps_usable() -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| {
        read_tsc().is_some()
            && std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .is_ok_and(|s| s.trim() == "tsc")
    })
}

/// A phase stamp of the kind the segment's [`shm_layout::StampClock`] says
/// (`tsc`: its `is_tsc()`, read once by the caller).
pub fn phase_stamp(tsc: bool) -> u64 {
    tsc.then(read_tsc).flatten().unwrap_or_else(monotonic_ns)
}

/// Shared (cross-process) futex: `FUTEX_WAIT`/`FUTEX_WAKE` without
/// the private-futex flag, so a wake in one process reaches sleepers in others.
#[derive(Debug, Default, Clone, Copy)]
pub struct SharedFutex;

impl shm_layout::futex::Futex for SharedFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        use rustix::thread::futex;
        let ts = timeout.map(|t| rustix::time::Timespec {
            tv_sec: t.as_secs() as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        // EAGAIN (word changed), EINTR and ETIMEDOUT all mean "re-check".
        let _ = futex::wait(word, futex::Flags::empty(), expected, ts.as_ref());
    }

    fn wake(&self, word: &AtomicU32, n: u32) -> usize {
        use rustix::thread::futex;
        futex::wake(word, futex::Flags::empty(), n).unwrap_or(0)
    }

    fn yield_cpu(&self) {
        rustix::thread::sched_yield();
    }
}

/// Why a client could not use an advertised segment (it then falls back to
/// the socket and logs this at debug level).
#[derive(Debug, thiserror::Error)]
pub enum AttachFailure {
    #[error("cannot map the segment: {0}")]
    Map(#[from] io::Error),
    #[error("segment not usable: {0}")]
    Layout(#[from] shm_layout::AttachError),
}

impl Mapping {
    /// A small memfd whose header carries this build's magic and version but
    /// a different layout hash: what a client of another fastpmi version
    /// would find. Used to test that clients refuse such a segment and fall
    /// back to the socket (`FASTPMI_ADVERTISE_FOREIGN_SEGMENT=1`).
    pub fn foreign_stamp() -> io::Result<Mapping> {
        let m = Mapping::create(MemPool::AnonMmap, 4096)?;
        let (magic, major, minor, hash) = shm_layout::stamp();
        let mut header = [0u8; 24];
        header[..8].copy_from_slice(&magic);
        header[8..10].copy_from_slice(&major.to_ne_bytes());
        header[10..12].copy_from_slice(&minor.to_ne_bytes());
        header[shm_layout::INIT_OFFSET..shm_layout::INIT_OFFSET + 4]
            .copy_from_slice(&shm_layout::INIT_DONE.to_ne_bytes());
        header[shm_layout::HASH_OFFSET..].copy_from_slice(&(!hash).to_ne_bytes());
        // SAFETY: the mapping is fresh and 4096 bytes long; nothing else
        // references it yet.
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), m.as_ptr(), header.len()) };
        Ok(m)
    }
}

/// A mapped and validated job segment, owning its mapping.
pub struct JobSegment {
    // Declared before `mapping`: dropped first, never outlives it.
    seg: shm_layout::SegmentRef<'static>,
    mapping: Mapping,
}

impl JobSegment {
    /// Create and initialise the segment of a job (launcher side).
    pub fn create(
        pool: MemPool,
        params: &shm_layout::SegmentParams,
        job_id: &str,
    ) -> io::Result<JobSegment> {
        let layout = shm_layout::SegmentLayout::plan(*params)
            .map_err(|e| io::Error::other(format!("segment layout: {e}")))?;
        let mapping = Mapping::create(pool, layout.total_size as usize)?;
        // SAFETY: the mapping is fresh (all zero bytes: a new memfd or SysV
        // segment), exclusively ours, and is moved into the returned struct
        // next to the reference; `seg()` only hands out references bounded
        // by `&self`, so none outlives the mapping.
        let seg = unsafe {
            shm_layout::Segment::init_zeroed(mapping.as_ptr(), mapping.len(), params, job_id)
        }
        .map_err(|e| io::Error::other(format!("segment init: {e}")))?;
        Ok(JobSegment { seg, mapping })
    }

    fn from_mapping(mapping: Mapping) -> Result<JobSegment, AttachFailure> {
        // SAFETY: as in `create`: the reference never outlives the mapping
        // it is stored with. Attach validates magic, version and layout hash
        // before anything else is read.
        let seg = unsafe { shm_layout::Segment::attach(mapping.as_ptr(), mapping.len())? };
        Ok(JobSegment { seg, mapping })
    }

    /// Attach a memfd inherited as `fd` (client side).
    pub fn attach_fd(fd: RawFd) -> Result<JobSegment, AttachFailure> {
        Self::from_mapping(Mapping::attach_fd(fd)?)
    }

    /// Attach a SysV segment by id (client side).
    pub fn attach_sysv(id: i32) -> Result<JobSegment, AttachFailure> {
        Self::from_mapping(Mapping::attach_sysv(id)?)
    }

    pub fn seg(&self) -> shm_layout::SegmentRef<'_> {
        self.seg
    }

    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shm_layout::futex::Futex;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    const CHILD_ENV: &str = "FASTPMI_FUTEX_TEST_SYSV_ID";

    /// The first two words of a test mapping: [0] the futex word, [1] "ready".
    fn words(m: &Mapping) -> (&AtomicU32, &AtomicU32) {
        assert!(m.len() >= 8);
        // SAFETY: the mapping is at least 8 bytes, page aligned, shared
        // memory used only through these atomics for the life of `m`.
        unsafe {
            (
                &*(m.as_ptr() as *const AtomicU32),
                &*(m.as_ptr().add(4) as *const AtomicU32),
            )
        }
    }

    /// A sleeper in another process is woken by `SharedFutex::wake`. With a
    /// private futex the wake would never reach it: it sleeps without a
    /// timeout, so this test would hang until its deadline and fail.
    #[test]
    fn shared_futex_wakes_a_sleeper_in_another_process() {
        if let Ok(id) = std::env::var(CHILD_ENV) {
            let m = Mapping::attach_sysv(id.parse().unwrap()).unwrap();
            let (word, ready) = words(&m);
            ready.store(1, Ordering::Release);
            while word.load(Ordering::Acquire) == 0 {
                SharedFutex.wait(word, 0, None);
            }
            std::process::exit(0);
        }
        let m = Mapping::create(MemPool::Sysv, 4096).unwrap();
        let (word, ready) = words(&m);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "tests::shared_futex_wakes_a_sleeper_in_another_process",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, m.sysv_id().unwrap().to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while ready.load(Ordering::Acquire) == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "child never attached"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Let it fall asleep in FUTEX_WAIT.
        std::thread::sleep(Duration::from_millis(200));
        word.store(1, Ordering::Release);
        SharedFutex.wake(word, 1);
        let t = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                assert!(st.success());
                return;
            }
            if t.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("the wake did not reach the other process: not a shared futex");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
