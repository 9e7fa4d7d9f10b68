//! Upcalls from the library's thread, each handed to the one file that
//! serves its family, and the event loop's other doors to the PMIx part:
//! its timers and the shared name server's answers (the name operations
//! live in `names`, which the host's own file imports).

use std::time::Duration;

use fastpmi_server::{Event, JobIdx, NameResult, Server};
use pmix_host::{SpawnUpcall, Upcall};

use super::host::PmixHost;
use crate::launcher::jobs::Jobs;
use crate::launcher::supervise::Procs;

/// What an upcall asks of the launcher's other parts, carried out before
/// the next upcall is served.
pub(in crate::launcher) enum Reaction {
    /// A rank's `PMIx_Abort` fails its job: what the launcher records as
    /// its failure, and ends the jobs connected to it with.
    Abort {
        job: JobIdx,
        rank: u32,
        code: i32,
        message: String,
    },
    /// `PMIx_Spawn`: a job made as a PMI spawn's.
    Spawn(SpawnUpcall),
}

impl PmixHost {
    /// Serve upcall `u` (`shared_names`: a shared name server reaches
    /// other launchers).
    pub(in crate::launcher) fn upcall(
        &mut self,
        u: Upcall,
        server: &mut Server,
        events: &mut Vec<Event>,
        procs: &Procs,
        jobs: &Jobs,
        shared_names: bool,
    ) -> Option<Reaction> {
        match u {
            Upcall::Client(u) => return self.client(u, server, events, procs),
            Upcall::Names(u) => self.names.upcall(u, server, events),
            Upcall::Remote(u) => self.remote(u, server, events, shared_names),
            Upcall::Query(u) => self.query(u, server, jobs, procs),
            Upcall::Spawn(u) => return Some(Reaction::Spawn(u)),
            Upcall::Group(u) => self.group(u, server),
        }
        None
    }

    /// How long until the PMIx part has something to do of its own:
    /// lookups to ask again, files to record, dead ranks to deregister.
    pub(in crate::launcher) fn tick(&self) -> Option<Duration> {
        [self.names.tick(), self.record_tick(), self.dead_tick()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The shared name server answered operation `token` of a PMIx client.
    pub(in crate::launcher) fn name_done(&mut self, token: u64, result: NameResult) {
        self.names.done(token, result);
    }

    /// What is due after a pass of the event loop: the lookups waiting
    /// for names asked again, the clients' files recorded, dead ranks let
    /// go. Whether lookups were asked again (their operations may be
    /// `events` to send at once).
    pub(in crate::launcher) fn due(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        procs: &Procs,
    ) -> bool {
        let retried = self.names.retry(server, events);
        self.record_due(server, procs);
        if self.dead_tick() == Some(Duration::ZERO) {
            self.end_ranks_and_jobs(server);
        }
        retried
    }
}
