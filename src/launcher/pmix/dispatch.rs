//! Upcalls from the library's thread, each handed to the one file that
//! serves its family.

use pmix_host::Upcall;

use crate::launcher::Launcher;

impl Launcher {
    /// What PMIx clients asked for since the last look.
    pub(in crate::launcher) fn pmix_upcalls(&mut self) {
        let Some(host) = &self.pmix else { return };
        for u in host.upcalls() {
            match u {
                Upcall::Client(u) => self.pmix_client(u),
                Upcall::Names(u) => self.pmix_names_upcall(u),
                Upcall::Remote(u) => self.pmix_remote(u),
                Upcall::Query(u) => self.pmix_query(u),
                Upcall::Spawn(u) => self.pmix_spawn(u),
                Upcall::Group(u) => self.pmix_group(u),
            }
        }
        self.pmix_end_ranks_and_jobs();
        self.apply_events();
    }
}
