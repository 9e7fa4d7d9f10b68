//! Never a silent singleton: a rank on the PMI personality that loads Open
//! MPI (`libmpi.so.40`) or OpenPMIx (`libpmix.so`) finds no PMIx server,
//! starts as a singleton, and its job "succeeds" N times over. Where `--pmi
//! auto` could not tell (an interpreter whose MPI it cannot see, a script),
//! or PMI was named, the launcher looks at such ranks' mappings
//! (`/proc/<pid>/maps`, of the rank and a few descendants) while they run
//! and have not connected, and says so once per section:
//!
//! ```text
//! fastpmi: rank 2 (python3) loaded Open MPI's libmpi.so.40 but runs on PMI: it is a singleton; launch it with --pmi pmix
//! ```
//!
//! Bounded: a section is looked at 150 ms after it is queued, then at
//! doubling intervals up to 30 s, at most 4 ranks each time; it is dropped
//! once a rank of it connects over PMI, maps another MPI (`libmpi.so.12`:
//! MPICH, Intel MPI), has been named, or all its ranks are gone.

use std::ops::Range;
use std::time::{Duration, Instant};

use super::supervise::Procs;
use fastpmi_server::{JobIdx, Server};

/// The first look, and the shortest interval: an Open MPI program maps
/// `libmpi.so.40` as it starts, Python when it imports `mpi4py`.
const FIRST: Duration = Duration::from_millis(150);
/// The longest interval between two looks at a section.
const LONGEST: Duration = Duration::from_secs(30);
/// Ranks read per section per look.
const PER_LOOK: usize = 4;
/// Processes read per rank: the rank and its descendants (a shell that
/// forked the program).
const TREE_MAX: usize = 8;

/// The PMI sections still watched.
#[derive(Default)]
pub(super) struct Watch {
    sections: Vec<Section>,
}

struct Section {
    job: JobIdx,
    ranks: Range<u32>,
    next: Instant,
    interval: Duration,
    /// Where the next look starts among the section's running ranks.
    cursor: usize,
}

impl Watch {
    /// Watch the PMI ranks `ranks` of `job` (one section).
    pub(super) fn watch(&mut self, job: JobIdx, ranks: Range<u32>) {
        if ranks.is_empty() {
            return;
        }
        self.sections.push(Section {
            job,
            ranks,
            next: Instant::now() + FIRST,
            interval: FIRST,
            cursor: 0,
        });
    }

    /// How long the event loop may sleep before the next look.
    pub(super) fn wait(&self) -> Option<Duration> {
        let next = self.sections.iter().map(|s| s.next).min()?;
        Some(next.saturating_duration_since(Instant::now()))
    }
}

/// What a look at a section found.
enum Look {
    /// Nothing yet: look again later.
    Again,
    /// Done with it (a PMI job, another MPI, named, or ended).
    Done,
}

/// What a process maps.
#[derive(Debug, PartialEq, Eq)]
enum Mapped {
    /// Open MPI's or OpenPMIx's library (its file name).
    OpenMpi(String),
    /// Another MPI's `libmpi.so.12` (MPICH, Intel MPI).
    OtherMpi,
    Nothing,
}

impl Watch {
    /// Look at the PMI sections that are due (the loop's hook): their
    /// connections on `server`, their processes in `procs`.
    pub(super) fn check(&mut self, server: &Server, procs: &Procs) {
        if self.sections.is_empty() {
            return;
        }
        let now = Instant::now();
        if !self.sections.iter().any(|s| s.next <= now) {
            return;
        }
        let mut sections = std::mem::take(&mut self.sections);
        sections.retain_mut(|s| {
            if s.next > now {
                return true;
            }
            match look(s, server, procs) {
                Look::Done => false,
                Look::Again => {
                    s.interval = (s.interval * 2).min(LONGEST);
                    s.next = now + s.interval;
                    true
                }
            }
        });
        // Sections queued meanwhile (none: looks create no job) stay.
        sections.append(&mut self.sections);
        self.sections = sections;
    }
}

fn look(s: &mut Section, server: &Server, procs: &Procs) -> Look {
    if s.ranks.clone().any(|r| server.rank_connected(s.job, r)) {
        return Look::Done;
    }
    // The section's ranks started so far, and those running long
    // enough to have loaded their MPI.
    let mut started = 0;
    let mut running = false;
    let mut ready = Vec::new();
    for p in procs.of_job(s.job).filter(|p| s.ranks.contains(&p.rank)) {
        started += 1;
        if p.status.is_none() {
            running = true;
            if p.started.elapsed() >= FIRST {
                ready.push((p.rank, p.pid));
            }
        }
    }
    if !running && started >= s.ranks.len() {
        return Look::Done;
    }
    if ready.is_empty() {
        return Look::Again;
    }
    for k in 0..PER_LOOK.min(ready.len()) {
        let (rank, pid) = ready[(s.cursor + k) % ready.len()];
        match tree_maps(pid) {
            Some((Mapped::OpenMpi(lib), who)) => {
                let what = if lib.starts_with("libmpi.so.40") {
                    "Open MPI's libmpi.so.40".to_string()
                } else {
                    lib
                };
                crate::errln!(
                    "fastpmi: {} ({who}) loaded {what} but runs on PMI: it is a singleton; \
                         launch it with --pmi pmix",
                    server.rank_name(s.job, rank)
                );
                return Look::Done;
            }
            Some((Mapped::OtherMpi, _)) => return Look::Done,
            _ => {}
        }
    }
    s.cursor = (s.cursor + PER_LOOK) % ready.len();
    Look::Again
}

/// What process `pid` and its first descendants map, with the name of the
/// process that maps it (`/proc/<pid>/comm`).
fn tree_maps(pid: u32) -> Option<(Mapped, String)> {
    let mut todo = vec![pid];
    let mut seen = 0;
    while let Some(p) = todo.pop() {
        seen += 1;
        if seen > TREE_MAX {
            break;
        }
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{p}/maps")) else {
            continue;
        };
        match mapped(&maps) {
            Mapped::Nothing => {}
            m => {
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                return Some((m, comm.trim().to_string()));
            }
        }
        if let Ok(list) = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")) {
            todo.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    None
}

/// The MPI a process's mappings show (Open MPI's `libmpi.so.40` named
/// before the `libpmix` it loads).
fn mapped(maps: &str) -> Mapped {
    let mut pmix = None;
    let mut other = false;
    for line in maps.lines() {
        // The path is the last field; only file mappings have one.
        let Some(path) = line.find('/').map(|at| &line[at..]) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.starts_with("libmpi.so.40") {
            return Mapped::OpenMpi(name.to_string());
        }
        if name.starts_with("libpmix.so") {
            pmix.get_or_insert_with(|| name.to_string());
        }
        other |= name.starts_with("libmpi.so.12");
    }
    match (pmix, other) {
        (Some(p), _) => Mapped::OpenMpi(p),
        (None, true) => Mapped::OtherMpi,
        (None, false) => Mapped::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mpi_of_a_mapping_is_named() {
        let line = |p: &str| format!("7f4843800000-7f4843900000 r-xp 00000000 08:01 1234 {p}\n");
        let ompi = line("/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40.30.5");
        let pmix = line("/v/lib/openmpi/libpmix.so.2");
        assert_eq!(
            mapped(&(line("/usr/lib/libc.so.6") + &pmix + &ompi)),
            Mapped::OpenMpi("libmpi.so.40.30.5".into()),
            "Open MPI is named before its PMIx"
        );
        assert_eq!(
            mapped(&line("/v/lib/openmpi/libpmix.so.2.13.5")),
            Mapped::OpenMpi("libpmix.so.2.13.5".into())
        );
        assert_eq!(mapped(&line("/v/lib/libmpi.so.12.0.0")), Mapped::OtherMpi);
        assert_eq!(
            mapped("7f48-7f49 rw-p 00000000 00:00 0 \n7ffd-7ffe rw-p 00000000 00:00 0 [stack]\n"),
            Mapped::Nothing
        );
    }

    #[test]
    fn a_section_is_due_first_after_a_short_while() {
        let mut w = Watch::default();
        w.watch(0, 0..0);
        assert!(w.wait().is_none(), "an empty section is not watched");
        w.watch(0, 0..4);
        assert!(w.wait().unwrap() <= FIRST);
    }
}
