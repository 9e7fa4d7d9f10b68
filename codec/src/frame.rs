//! Cutting a byte stream into frames.
//!
//! After the PMI-1 style `cmd=init` line, a message that begins with `cmd=`
//! or `mcmd=` is PMI-1 and anything else is a PMI-2 length-prefixed body;
//! like Hydra we decide per message, so a stream may mix them. Never assume
//! one `read()` is one message: bytes are appended with [`Deframer::feed`]
//! and complete frames taken with [`Deframer::next_frame`].

use super::{WireError, PMI1_LINE_MAX, SPAWN_BLOCK_MAX};

/// One complete message as it came off the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A PMI-1 line without its `\n` (a trailing `\r` is removed too).
    Pmi1(Vec<u8>),
    /// A PMI-1 `mcmd=spawn` block: every line up to the last `endcmd`.
    Pmi1Spawn(Vec<u8>),
    /// A PMI-2 body (the bytes after the 6-byte length).
    Pmi2(Vec<u8>),
}

/// Length of the PMI-2 length header.
pub const PMI2_HEADER: usize = 6;

/// Incremental frame splitter for one connection.
#[derive(Debug, Default)]
pub struct Deframer {
    buf: Vec<u8>,
    start: usize,
    /// Inside an overlong PMI-1 line: drop bytes up to the next newline.
    discarding: bool,
    /// The stream lost sync (bad PMI-2 header); no further frames.
    broken: bool,
    /// How far the incomplete message at `start` has been read, so that a
    /// message arriving in many small reads is scanned once and not once
    /// per read (quadratic: a 1 MiB spawn block in 1-byte reads would stall
    /// the event loop for minutes).
    scan: Scan,
}

/// Progress through the incomplete message at `start` (offsets from `start`).
#[derive(Debug, Default)]
struct Scan {
    /// Bytes searched for a newline without finding one.
    searched: usize,
    /// Spawn blocks: the first line not yet read, and what the lines before
    /// it said.
    line: usize,
    endcmds: usize,
    totspawns: Option<usize>,
}

impl Deframer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Append bytes read from the socket. A broken stream keeps nothing:
    /// its connection is being closed, and memory must not grow meanwhile.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.broken {
            self.buf = Vec::new();
            self.start = 0;
            return;
        }
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The message at `start` is done with: move past `n` bytes.
    fn consume(&mut self, n: usize) {
        self.start += n;
        self.scan = Scan::default();
    }

    /// Drop every pending byte.
    fn consume_all(&mut self) {
        self.consume(self.buf.len() - self.start);
    }

    /// True once the stream can no longer be framed (see [`WireError::BadLength`]).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed.
    ///
    /// An overlong PMI-1 line yields `Err(LineTooLong)` once and the stream
    /// resynchronises at the next newline; a bad PMI-2 header yields
    /// `Err(BadLength)` and the deframer stays broken (nothing can be trusted
    /// after a wrong length).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, WireError> {
        if self.broken {
            return Ok(None);
        }
        loop {
            let data = &self.buf[self.start..];
            if data.is_empty() {
                return Ok(None);
            }
            if self.discarding {
                match memchr(b'\n', data) {
                    Some(i) => {
                        self.consume(i + 1);
                        self.discarding = false;
                        return Err(WireError::LineTooLong { max: PMI1_LINE_MAX });
                    }
                    None => {
                        self.consume_all();
                        return Ok(None);
                    }
                }
            }
            // Blank lines between messages carry nothing; skip them.
            if data[0] == b'\n' || data[0] == b'\r' {
                self.consume(1);
                continue;
            }
            return match classify(data) {
                Kind::NeedMore => Ok(None),
                Kind::Pmi1 => self.take_line(),
                Kind::Spawn => self.take_spawn(),
                Kind::Pmi2 => self.take_pmi2(),
            };
        }
    }

    fn take_line(&mut self) -> Result<Option<Frame>, WireError> {
        let data = &self.buf[self.start..];
        let from = self.scan.searched;
        match memchr(b'\n', &data[from..]).map(|i| from + i) {
            Some(i) if i <= PMI1_LINE_MAX => {
                let mut line = &data[..i];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                let frame = Frame::Pmi1(line.to_vec());
                self.consume(i + 1);
                Ok(Some(frame))
            }
            Some(i) => {
                self.consume(i + 1);
                Err(WireError::LineTooLong { max: PMI1_LINE_MAX })
            }
            None if data.len() > PMI1_LINE_MAX => {
                self.consume_all();
                self.discarding = true;
                Ok(None)
            }
            None => {
                self.scan.searched = data.len();
                Ok(None)
            }
        }
    }

    /// `mcmd=spawn` is complete when the number of `endcmd` lines reaches
    /// `totspawns` (1 when the key is absent). Older clients write it in
    /// several `write()` calls: lines read so far are counted in `scan`.
    fn take_spawn(&mut self) -> Result<Option<Frame>, WireError> {
        let data = &self.buf[self.start..];
        let s = &mut self.scan;
        loop {
            let from = s.searched.max(s.line);
            let Some(i) = memchr(b'\n', &data[from..]) else {
                s.searched = data.len();
                break;
            };
            let line = trim_cr(&data[s.line..from + i]);
            s.line = from + i + 1;
            if line == b"endcmd" {
                s.endcmds += 1;
                if s.endcmds >= s.totspawns.unwrap_or(1) {
                    if s.line > SPAWN_BLOCK_MAX {
                        break;
                    }
                    let pos = s.line;
                    let frame = Frame::Pmi1Spawn(data[..pos].to_vec());
                    self.consume(pos);
                    return Ok(Some(frame));
                }
            } else if let Some(v) = line.strip_prefix(b"totspawns=") {
                if s.totspawns.is_none() {
                    s.totspawns = std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .map(|n: usize| n.max(1));
                }
            }
        }
        if data.len() > SPAWN_BLOCK_MAX {
            // A spawn request this large is not a spawn request; where the
            // next message starts cannot be known.
            self.broken = true;
            self.buf = Vec::new();
            self.start = 0;
            self.scan = Scan::default();
            return Err(WireError::SpawnTooLong {
                max: SPAWN_BLOCK_MAX,
            });
        }
        Ok(None)
    }

    fn take_pmi2(&mut self) -> Result<Option<Frame>, WireError> {
        let data = &self.buf[self.start..];
        if data.len() < PMI2_HEADER {
            return Ok(None);
        }
        let header = &data[..PMI2_HEADER];
        let len = match parse_length(header) {
            Some(n) => n,
            None => {
                self.broken = true;
                return Err(WireError::BadLength(super::show(header)));
            }
        };
        if data.len() < PMI2_HEADER + len {
            return Ok(None);
        }
        let body = data[PMI2_HEADER..PMI2_HEADER + len].to_vec();
        self.consume(PMI2_HEADER + len);
        Ok(Some(Frame::Pmi2(body)))
    }
}

enum Kind {
    NeedMore,
    Pmi1,
    Spawn,
    Pmi2,
}

fn classify(data: &[u8]) -> Kind {
    for (prefix, kind) in [(&b"cmd="[..], Kind::Pmi1), (&b"mcmd="[..], Kind::Spawn)] {
        let n = data.len().min(prefix.len());
        if data[..n] == prefix[..n] {
            return if n == prefix.len() {
                kind
            } else {
                Kind::NeedMore
            };
        }
    }
    Kind::Pmi2
}

/// A PMI-2 length: six ASCII bytes, decimal, left- or right-aligned with
/// blanks (Slurm writes `"38    "`, Hydra `"   113"`).
pub fn parse_length(header: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(header).ok()?;
    let t = s.trim_matches(|c: char| c == ' ' || c == '\0' || c == '\t');
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

pub(crate) fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8], chunk: usize) -> Vec<Result<Frame, WireError>> {
        let mut d = Deframer::new();
        let mut out = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            d.feed(piece);
            loop {
                match d.next_frame() {
                    Ok(Some(f)) => out.push(Ok(f)),
                    Ok(None) => break,
                    Err(e) => out.push(Err(e)),
                }
            }
        }
        out
    }

    #[test]
    fn mixed_stream_any_chunking() {
        let input = b"cmd=init pmi_version=2 pmi_subversion=0\n38    cmd=fullinit;pmirank=0;threaded=FALSE;    14cmd=job-getid;cmd=barrier_in\n";
        for chunk in 1..input.len() {
            let got: Vec<_> = frames(input, chunk)
                .into_iter()
                .map(|f| f.unwrap())
                .collect();
            assert_eq!(
                got,
                vec![
                    Frame::Pmi1(b"cmd=init pmi_version=2 pmi_subversion=0".to_vec()),
                    Frame::Pmi2(b"cmd=fullinit;pmirank=0;threaded=FALSE;".to_vec()),
                    Frame::Pmi2(b"cmd=job-getid;".to_vec()),
                    Frame::Pmi1(b"cmd=barrier_in".to_vec()),
                ],
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn spawn_block_waits_for_all_endcmds() {
        let input = b"mcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=2\nspawnssofar=1\nendcmd\nmcmd=spawn\nnprocs=1\nexecname=b\ntotspawns=2\nspawnssofar=2\nendcmd\ncmd=finalize\n";
        for chunk in 1..=input.len() {
            let got = frames(input, chunk);
            assert_eq!(got.len(), 2);
            match &got[0] {
                Ok(Frame::Pmi1Spawn(b)) => assert!(b.ends_with(b"spawnssofar=2\nendcmd\n")),
                other => panic!("{other:?}"),
            }
            assert_eq!(got[1], Ok(Frame::Pmi1(b"cmd=finalize".to_vec())));
        }
    }

    #[test]
    fn spawn_block_read_in_pieces_keeps_its_count() {
        // totspawns and endcmd split across reads, CRLF lines, a totspawns
        // line that does not parse before one that does.
        let input = b"mcmd=spawn\r\ntotspawns=x\r\ntotspawns=3\r\nendcmd\r\nmcmd=spawn\nendcmd\nmcmd=spawn\nendcmd\r\n38    cmd=fullinit;pmirank=0;threaded=FALSE;";
        for chunk in 1..=input.len() {
            let got = frames(input, chunk);
            assert_eq!(got.len(), 2, "chunk size {chunk}: {got:?}");
            match &got[0] {
                Ok(Frame::Pmi1Spawn(b)) => assert_eq!(b.len(), 83, "chunk size {chunk}"),
                other => panic!("chunk size {chunk}: {other:?}"),
            }
            assert!(matches!(got[1], Ok(Frame::Pmi2(_))), "chunk size {chunk}");
        }
    }

    #[test]
    fn spawn_block_limit_whatever_the_reads() {
        // A block that completes exactly at the limit is a frame; one byte
        // more is an error and the stream is broken, read at once or not.
        let head = b"mcmd=spawn\nexecname=a\n";
        let tail = b"\nendcmd\n";
        let fill = SPAWN_BLOCK_MAX - head.len() - tail.len() - "x=".len();
        for extra in [0, 1] {
            let mut block = head.to_vec();
            block.extend_from_slice(b"x=");
            block.extend(std::iter::repeat_n(b'A', fill + extra));
            block.extend_from_slice(tail);
            for chunk in [1000, 65536, block.len()] {
                let got = frames(&block, chunk);
                assert_eq!(got.len(), 1, "extra {extra}, chunk {chunk}");
                if extra == 0 {
                    assert!(
                        matches!(&got[0], Ok(Frame::Pmi1Spawn(b)) if b.len() == SPAWN_BLOCK_MAX)
                    );
                } else {
                    let max = SPAWN_BLOCK_MAX;
                    assert_eq!(got[0], Err(WireError::SpawnTooLong { max }));
                }
            }
        }
    }

    #[test]
    fn overlong_line_is_an_error_then_resync() {
        let mut input = b"cmd=put key=".to_vec();
        input.extend(std::iter::repeat_n(b'A', PMI1_LINE_MAX + 10));
        input.extend(b"\ncmd=get_maxes\n");
        let got = frames(&input, 4096);
        assert_eq!(got[0], Err(WireError::LineTooLong { max: PMI1_LINE_MAX }));
        assert_eq!(got[1], Ok(Frame::Pmi1(b"cmd=get_maxes".to_vec())));
    }

    #[test]
    fn bad_pmi2_header_breaks_stream() {
        let got = frames(b"xx12  cmd=foo;", 100);
        assert!(matches!(got[0], Err(WireError::BadLength(_))));
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn length_alignment() {
        assert_eq!(parse_length(b"   113"), Some(113));
        assert_eq!(parse_length(b"38    "), Some(38));
        assert_eq!(parse_length(b"000012"), Some(12));
        assert_eq!(parse_length(b"      "), None);
        assert_eq!(parse_length(b"1 2   "), None);
        assert_eq!(parse_length(b"-1    "), None);
    }
}
