//! `Segment::attach` accepts a segment `init` built, and rejects anything
//! else with an error naming what did not match.
#![cfg(not(loom))]

use shm_layout::heap::AlignedBuffer;
use shm_layout::{
    stamp, AttachError, LayoutError, Segment, SegmentLayout, SegmentParams, HASH_OFFSET,
    INIT_OFFSET, LAYOUT_HASH, LAYOUT_MAJOR, LAYOUT_MINOR, MAGIC, MAJOR_OFFSET, MINOR_OFFSET,
};

struct Fixture {
    _buf: AlignedBuffer,
    base: *mut u8,
    len: usize,
}

impl Fixture {
    /// An initialised segment.
    fn new() -> Self {
        let params = SegmentParams::for_ranks(4);
        let total = SegmentLayout::plan(params).unwrap().total_size as usize;
        let mut buf = AlignedBuffer::new(total);
        let (base, len) = (buf.as_mut_ptr(), buf.len());
        // SAFETY: `buf` lives in the fixture; the handle is dropped at once.
        unsafe { Segment::init(base, len, &params, "job-7").unwrap() };
        Self {
            _buf: buf,
            base,
            len,
        }
    }

    fn attach(&self) -> Result<(), AttachError> {
        self.attach_at(self.base, self.len)
    }

    fn attach_at(&self, base: *mut u8, len: usize) -> Result<(), AttachError> {
        // SAFETY: inside the fixture's buffer (or rejected before any read).
        unsafe { Segment::attach(base, len) }.map(|_| ())
    }

    fn bytes(&self, off: usize, n: usize) -> Vec<u8> {
        // SAFETY: in bounds; no handle is alive.
        unsafe { std::slice::from_raw_parts(self.base.add(off), n).to_vec() }
    }

    fn poke(&self, off: usize, bytes: &[u8]) {
        // SAFETY: in bounds; no handle is alive.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(off), bytes.len()) }
    }
}

#[test]
fn attach_accepts_what_init_built_and_stamp_is_at_offset_0() {
    let f = Fixture::new();
    // SAFETY: as in the fixture.
    let seg = unsafe { Segment::attach(f.base, f.len) }.unwrap();
    assert_eq!(seg.job_id(), "job-7");
    assert_eq!(seg.nranks(), 4);
    assert_eq!(seg.ranks().len(), 4);
    assert_eq!(seg.fence().parties(), 4);
    assert_eq!(
        seg.header().layout(),
        SegmentLayout::plan(SegmentParams::for_ranks(4)).unwrap()
    );
    let (magic, major, minor, hash) = stamp();
    assert_eq!(
        (magic, major, minor, hash),
        (MAGIC, LAYOUT_MAJOR, LAYOUT_MINOR, LAYOUT_HASH)
    );
    assert_eq!(&f.bytes(0, 8), b"FASTPMI\0");
    assert_eq!(f.bytes(MAJOR_OFFSET, 2), major.to_ne_bytes());
    assert_eq!(f.bytes(MINOR_OFFSET, 2), minor.to_ne_bytes());
    assert_eq!(f.bytes(HASH_OFFSET, 8), hash.to_ne_bytes());
    assert_eq!(f.bytes(INIT_OFFSET, 4), shm_layout::INIT_DONE.to_ne_bytes());
}

#[test]
fn attach_rejects_wrong_magic() {
    let f = Fixture::new();
    f.poke(0, b"X");
    assert_eq!(
        f.attach(),
        Err(AttachError::BadMagic {
            found: *b"XASTPMI\0"
        })
    );
}

#[test]
fn attach_rejects_uninitialised() {
    let f = Fixture::new();
    // Magic present but the initialised word never stored (init died).
    f.poke(INIT_OFFSET, &[0; 4]);
    assert_eq!(f.attach(), Err(AttachError::Uninitialised));
    // Fresh zero memory.
    let mut zero = AlignedBuffer::new(f.len);
    let len = zero.len();
    // SAFETY: a live buffer of `len` bytes.
    let attached = unsafe { Segment::attach(zero.as_mut_ptr(), len) };
    assert_eq!(attached.map(|_| ()), Err(AttachError::Uninitialised));
}

#[test]
fn attach_rejects_wrong_hash() {
    let f = Fixture::new();
    f.poke(HASH_OFFSET, &(LAYOUT_HASH ^ 1).to_ne_bytes());
    assert_eq!(
        f.attach(),
        Err(AttachError::LayoutHashMismatch {
            found: LAYOUT_HASH ^ 1,
            expected: LAYOUT_HASH
        })
    );
}

#[test]
fn attach_rejects_other_versions() {
    let f = Fixture::new();
    f.poke(MAJOR_OFFSET, &(LAYOUT_MAJOR + 1).to_ne_bytes());
    assert!(matches!(
        f.attach(),
        Err(AttachError::VersionMismatch { .. })
    ));
    f.poke(MAJOR_OFFSET, &LAYOUT_MAJOR.to_ne_bytes());
    f.poke(MINOR_OFFSET, &(LAYOUT_MINOR + 1).to_ne_bytes());
    let err = f.attach().unwrap_err();
    assert!(matches!(err, AttachError::VersionMismatch { .. }));
    assert!(err.to_string().contains("this build knows"), "{err}");
}

#[test]
fn attach_rejects_short_length_and_misalignment() {
    let f = Fixture::new();
    assert!(matches!(
        f.attach_at(f.base, f.len - 1),
        Err(AttachError::TooShort { need, .. }) if need == f.len as u64
    ));
    assert_eq!(
        f.attach_at(f.base, 100),
        Err(AttachError::TooShort {
            len: 100,
            need: 320
        })
    );
    // SAFETY: still inside the buffer.
    let off = unsafe { f.base.add(8) };
    assert!(matches!(
        f.attach_at(off, f.len - 8),
        Err(AttachError::Misaligned { .. })
    ));
    assert!(matches!(
        f.attach_at(std::ptr::null_mut(), f.len),
        Err(AttachError::Misaligned { .. })
    ));
}

#[test]
fn init_rejects_bad_buffers_and_job_ids() {
    let params = SegmentParams::for_ranks(2);
    let total = SegmentLayout::plan(params).unwrap().total_size as usize;
    let mut buf = AlignedBuffer::new(total);
    let (base, len) = (buf.as_mut_ptr(), buf.len());
    // SAFETY: (all three) a live buffer; each call fails before writing.
    unsafe {
        assert!(matches!(
            Segment::init(base, len - 1, &params, "j"),
            Err(LayoutError::BufferTooSmall { .. })
        ));
        assert!(matches!(
            Segment::init(base.add(8), len - 8, &params, "j"),
            Err(LayoutError::Misaligned { .. })
        ));
        assert!(matches!(
            Segment::init(base, len, &params, &"j".repeat(65)),
            Err(LayoutError::JobIdTooLong { len: 65, max: 64 })
        ));
    }
}
