//! The PMI-1/PMI-2 deframer on any byte stream, fed whole and in pieces.
//!
//! Checks: no panic; every call consumes input or stops (no endless
//! stream of frames); frames are well-formed pieces of the input, in
//! order; the frames do not depend on how the stream was cut into reads.

#![no_main]

use fastpmi_codec::{Deframer, Frame, WireError, PMI1_LINE_MAX, PMI2_BODY_MAX, SPAWN_BLOCK_MAX};
use fastpmi_fuzz::show;
use libfuzzer_sys::fuzz_target;

type Item = Result<Frame, WireError>;

/// Take every frame available now.
fn drain(d: &mut Deframer, out: &mut Vec<Item>, limit: usize) {
    loop {
        match d.next_frame() {
            Ok(None) => return,
            Ok(Some(f)) => out.push(Ok(f)),
            Err(e) => out.push(Err(e)),
        }
        // Each frame or error consumes at least one byte (a bad PMI-2
        // header consumes none but stops the stream), so more items than
        // bytes means next_frame made no progress.
        assert!(out.len() <= limit, "{} items from {limit} bytes", out.len());
    }
}

/// The frames of `data` read in pieces of `cuts()` bytes.
fn frames(data: &[u8], cuts: &mut dyn FnMut() -> usize) -> Vec<Item> {
    let mut d = Deframer::new();
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let n = cuts().clamp(1, rest.len());
        d.feed(&rest[..n]);
        rest = &rest[n..];
        drain(&mut d, &mut out, data.len() + 1);
    }
    let fatal = out.iter().any(|r| matches!(r, Err(e) if fatal(e)));
    assert_eq!(
        d.is_broken(),
        fatal,
        "broken without a fatal error or the reverse"
    );
    if fatal {
        // A broken stream stays silent whatever follows.
        d.feed(b"cmd=init pmi_version=1 pmi_subversion=1\n");
        assert_eq!(d.next_frame(), Ok(None));
    }
    out
}

/// Errors after which nothing in the stream can be trusted.
fn fatal(e: &WireError) -> bool {
    matches!(e, WireError::BadLength(_) | WireError::SpawnTooLong { .. })
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(from);
    }
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

fn check_frames(data: &[u8], items: &[Item]) {
    let mut pos = 0;
    let mut broken = false;
    for item in items {
        assert!(!broken, "frame after a bad PMI-2 header");
        let body: &[u8] = match item {
            Ok(Frame::Pmi1(line)) => {
                assert!(line.starts_with(b"cmd="), "PMI-1 frame {}", show(line));
                assert!(!line.contains(&b'\n'), "newline inside {}", show(line));
                assert!(line.len() <= PMI1_LINE_MAX);
                line
            }
            Ok(Frame::Pmi1Spawn(block)) => {
                assert!(block.starts_with(b"mcmd="), "spawn frame {}", show(block));
                assert!(
                    block.ends_with(b"\nendcmd\n") || block.ends_with(b"\nendcmd\r\n"),
                    "spawn frame does not end in endcmd: {}",
                    show(block)
                );
                assert!(block.len() <= SPAWN_BLOCK_MAX);
                block
            }
            Ok(Frame::Pmi2(body)) => {
                assert!(body.len() <= PMI2_BODY_MAX);
                body
            }
            Err(WireError::LineTooLong { .. }) => continue,
            Err(e) if fatal(e) => {
                broken = true;
                continue;
            }
            Err(e) => panic!("deframer error that is not a framing error: {e:?}"),
        };
        // Frames are taken from the stream in order, never invented.
        let at = find(data, body, pos)
            .unwrap_or_else(|| panic!("frame {} is not in the input after byte {pos}", show(body)));
        pos = at + body.len();
    }
}

/// Byte that stands for [`BIG`] bytes of `A`, so that inputs of a few KB
/// reach the 64 KiB PMI-1 line limit (the 1 MiB spawn limit would make the
/// run ten times slower: tests in src/wire/frame.rs cover it).
const EXPAND: u8 = 0x01;
const BIG: usize = 4 * 1024;
/// At most this many expansions (80 KiB).
const MAX_EXPAND: usize = 20;

fn expand(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut n = 0;
    for &b in data {
        if b == EXPAND && n < MAX_EXPAND {
            out.extend(std::iter::repeat_n(b'A', BIG));
            n += 1;
        } else {
            out.push(b);
        }
    }
    out
}

fuzz_target!(|input: &[u8]| {
    let expanded = expand(input);
    let data = &expanded[..];
    let whole = frames(data, &mut || usize::MAX);
    check_frames(data, &whole);

    // Reads of pseudo-random sizes (mostly small, sometimes large; about a
    // thousand reads at most for the big expanded inputs, to keep the run
    // fast), derived from the input so that a crash reproduces.
    let small = (data.len() / 1024).max(16);
    let mut x = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    let mut cuts = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x % 8 == 0 {
            (x >> 8) as usize % (32 * small)
        } else {
            1 + (x >> 8) as usize % small
        }
    };
    let pieces = frames(data, &mut cuts);
    assert_eq!(whole, pieces, "frames depend on how the stream was read");
    // One byte per read: keep it to small inputs so the run stays fast.
    if data.len() <= 512 {
        let bytewise = frames(data, &mut || 1);
        assert_eq!(
            whole, bytewise,
            "frames differ when read one byte at a time"
        );
    }
});
