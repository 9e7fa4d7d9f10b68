//! Shared checks of the fuzz targets: what every reply the server produces
//! must look like on the wire, and the op-script format of the `server`
//! target (which scripts/fuzz-corpus writes seeds in).

use fastpmi_codec::frame::{parse_length, PMI2_HEADER};
use fastpmi_codec::{pmi1, pmi2, Deframer, Frame, PMI1_REPLY_MAX};

/// Longest PMI-2 reply body that does not echo a client's `thrid`: the
/// largest is a found value (1024 bytes, `;` doubled) plus short fixed keys.
pub const PMI2_REPLY_FIXED: usize = 4096;

/// Assert that `bytes` is one complete, well-formed reply.
///
/// PMI-1: `\n`-terminated `cmd=` lines (one, or the four of the port-mode
/// handshake), each under MPICH 4.0's 1024-byte line limit, the first with
/// an integer `rc=`, no empty values. PMI-2: a length header that matches
/// the body, a `*-response` command and an integer `rc`. `echo_max` is the
/// longest client frame seen (a PMI-2 `thrid` is echoed verbatim).
pub fn check_reply(bytes: &[u8], echo_max: usize) {
    assert!(!bytes.is_empty(), "empty reply");
    if bytes.starts_with(b"cmd=") {
        check_pmi1(bytes);
    } else {
        check_pmi2(bytes, echo_max);
    }
}

fn check_pmi1(bytes: &[u8]) {
    assert!(
        bytes.ends_with(b"\n"),
        "PMI-1 reply without newline: {}",
        show(bytes)
    );
    let lines: Vec<&[u8]> = bytes[..bytes.len() - 1].split(|&b| b == b'\n').collect();
    assert!(
        lines.len() == 1 || lines.len() == 4,
        "{} lines: {}",
        lines.len(),
        show(bytes)
    );
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.len() < PMI1_REPLY_MAX,
            "PMI-1 reply line of {} bytes (MPICH 4.0 reads at most {PMI1_REPLY_MAX}): {}",
            line.len() + 1,
            show(line)
        );
        let m = pmi1::decode(line)
            .unwrap_or_else(|e| panic!("reply {} does not decode: {e}", show(line)));
        for (k, v) in &m.pairs {
            assert!(
                !v.is_empty(),
                "empty value for {} in {}",
                show(k),
                show(line)
            );
        }
        if i == 0 {
            let rc = m.get_str("rc").and_then(|r| r.parse::<i32>().ok());
            assert!(rc.is_some(), "PMI-1 reply without rc: {}", show(line));
        } else {
            assert_eq!(m.cmd, "set", "handshake line {}", show(line));
        }
    }
}

fn check_pmi2(bytes: &[u8], echo_max: usize) {
    assert!(
        bytes.len() >= PMI2_HEADER,
        "short PMI-2 reply {}",
        show(bytes)
    );
    let (header, body) = bytes.split_at(PMI2_HEADER);
    assert_eq!(
        parse_length(header),
        Some(body.len()),
        "PMI-2 length header of {}",
        show(bytes)
    );
    assert!(
        body.len() <= PMI2_REPLY_FIXED + 2 * echo_max,
        "PMI-2 reply of {} bytes for frames of at most {echo_max}",
        body.len()
    );
    let m =
        pmi2::decode(body).unwrap_or_else(|e| panic!("reply {} does not decode: {e}", show(bytes)));
    assert!(m.cmd.ends_with("-response"), "reply command {}", m.cmd);
    assert!(
        m.get_str("rc")
            .and_then(|r| r.parse::<i32>().ok())
            .is_some(),
        "PMI-2 reply without rc: {}",
        show(bytes)
    );
    // Our own deframer takes it as exactly one frame.
    let mut d = Deframer::new();
    d.feed(bytes);
    assert_eq!(d.next_frame(), Ok(Some(Frame::Pmi2(body.to_vec()))));
    assert_eq!(d.next_frame(), Ok(None));
}

pub fn show(bytes: &[u8]) -> String {
    let mut s = fastpmi_codec::show(bytes);
    if s.len() > 300 {
        let mut cut = 300;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Number of connections the `server` target drives: 0 and 1 are ranks 0
/// and 1 of job 0 (FD mode, bound at connect), 2 and 3 are port-mode
/// connections of job 1 (they must identify themselves), 4 belongs to no job.
pub const CONNS: usize = 5;

/// One step of a `server` target script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<'a> {
    /// Bytes arrive on a connection (one `read()`).
    Bytes(usize, &'a [u8]),
    /// The peer closed the connection.
    Close(usize),
    /// The launcher reaped the process behind the connection.
    Exit { conn: usize, clean: bool },
    /// A closed port-mode or foreign connection connects again.
    Reconnect(usize),
    /// The launcher fails every job (Ctrl-C).
    FailAll,
    /// Event-loop housekeeping: store poll and stuck-fence check.
    Poll,
    /// The launcher answers the spawns asked for so far.
    FinishSpawns,
}

/// Script format: a tag byte, `kind << 3 | conn` (conn taken modulo
/// [`CONNS`]). Kinds 0-23: bytes, then one length byte and that many data
/// bytes (fewer at the end of the input); 24-25: close; 26: clean exit;
/// 27: exit with an error; 28: reconnect; 29: fail all jobs; 30: poll;
/// 31: finish spawns.
pub fn parse_script(data: &[u8]) -> Vec<Op<'_>> {
    let mut ops = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let tag = data[i];
        i += 1;
        let conn = (tag & 7) as usize % CONNS;
        ops.push(match tag >> 3 {
            24 | 25 => Op::Close(conn),
            26 => Op::Exit { conn, clean: true },
            27 => Op::Exit { conn, clean: false },
            28 => Op::Reconnect(conn),
            29 => Op::FailAll,
            30 => Op::Poll,
            31 => Op::FinishSpawns,
            _ => {
                let len = data.get(i).copied().unwrap_or(0) as usize;
                i = (i + 1).min(data.len());
                let end = (i + len).min(data.len());
                let bytes = &data[i..end];
                i = end;
                Op::Bytes(conn, bytes)
            }
        });
    }
    ops
}
