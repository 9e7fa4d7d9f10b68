//! `PMIx_Query_info` answered from fastpmi's jobs: the live namespaces,
//! the process sets of `--pset` (their number, names and members), which
//! is what Open MPI 5's MPI Sessions ask (`MPI_Session_get_num_psets`,
//! `MPI_Session_get_nth_pset`, `MPI_Group_from_session_pset`), the PMIx
//! groups (number, names, members) and the proc tables.

use fastpmi_server::Server;
use pmix_host::{
    proc_of, InfoList, QueryUpcall, PMIX_PROC_STATE_CONNECTED, PMIX_PROC_STATE_RUNNING,
    PMIX_PROC_STATE_TERMINATED,
};

use super::host::PmixHost;
use crate::launcher::jobs::Jobs;
use crate::launcher::os;
use crate::launcher::supervise::Procs;

/// The keys answered (`pmix_common.h`).
const QUERY_NAMESPACES: &str = pmix_host::keys::PMIX_QUERY_NAMESPACES;
const QUERY_NUM_PSETS: &str = pmix_host::keys::PMIX_QUERY_NUM_PSETS;
const QUERY_PSET_NAMES: &str = pmix_host::keys::PMIX_QUERY_PSET_NAMES;
const QUERY_PSET_MEMBERSHIP: &str = pmix_host::keys::PMIX_QUERY_PSET_MEMBERSHIP;
const QUERY_PROC_TABLE: &str = pmix_host::keys::PMIX_QUERY_PROC_TABLE;
const QUERY_LOCAL_PROC_TABLE: &str = pmix_host::keys::PMIX_QUERY_LOCAL_PROC_TABLE;
const QUERY_NUM_GROUPS: &str = pmix_host::keys::PMIX_QUERY_NUM_GROUPS;
const QUERY_GROUP_NAMES: &str = pmix_host::keys::PMIX_QUERY_GROUP_NAMES;
const QUERY_GROUP_MEMBERSHIP: &str = pmix_host::keys::PMIX_QUERY_GROUP_MEMBERSHIP;
/// The qualifier naming a group.
const GROUP_ID: &str = pmix_host::keys::PMIX_GROUP_ID;
/// The qualifier naming a process set.
const PSET_NAME: &str = pmix_host::keys::PMIX_PSET_NAME;
/// The qualifier naming a namespace.
const NSPACE: &str = pmix_host::keys::PMIX_NSPACE;

impl PmixHost {
    /// Answer `queries` of a process of `nspace` (a tool's namespace is no
    /// job: it sees every job's sets). Keys fastpmi does not know are left
    /// out; when none is answered the library hears "not found".
    pub(super) fn query(&self, u: QueryUpcall, server: &Server, jobs: &Jobs, procs: &Procs) {
        let QueryUpcall {
            nspace,
            queries,
            done,
            ..
        } = u;
        let nspace = nspace.as_str();
        tracing::debug!(?queries, "PMIx query by {nspace}");
        let requester = server.job_index(nspace);
        let live: Vec<_> = (0..jobs.len()).filter(|&j| jobs.live(j) > 0).collect();
        // (name, members as (namespace, rank)), in command-line order.
        let mut psets: Vec<(String, Vec<(String, u32)>)> = Vec::new();
        for &j in live.iter().filter(|&&j| requester.is_none_or(|r| r == j)) {
            let id = server.job_id(j).to_string();
            for (name, ranks) in server.psets_of(j) {
                let members = ranks.iter().map(|&r| (id.clone(), r));
                match psets.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, m)) => m.extend(members),
                    None => psets.push((name, members.collect())),
                }
            }
        }
        // The groups a job's process sees: those with a member of its job
        // (a tool sees all).
        let groups: Vec<(String, Vec<(String, u32)>)> = self
            .groups
            .iter()
            .filter(|(_, m)| requester.is_none() || m.iter().any(|(ns, _)| ns == nspace))
            .map(|(n, m)| (n.clone(), m.clone()))
            .collect();
        let mut answer = InfoList::default();
        for q in &queries {
            for k in &q.keys {
                let put = match k.as_str() {
                    QUERY_NAMESPACES => {
                        let ids: Vec<&str> = live
                            .iter()
                            .filter(|&&j| server.is_pmix_job(j))
                            .map(|&j| server.job_id(j))
                            .collect();
                        answer.string(k, &ids.join(","))
                    }
                    QUERY_NUM_PSETS => {
                        answer.size(k, psets.len());
                        Ok(())
                    }
                    QUERY_PSET_NAMES => {
                        let names: Vec<&str> = psets.iter().map(|(n, _)| n.as_str()).collect();
                        answer.string(k, &names.join(","))
                    }
                    QUERY_PSET_MEMBERSHIP => {
                        members_of(&mut answer, k, &psets, q.qual(PSET_NAME));
                        Ok(())
                    }
                    QUERY_NUM_GROUPS => {
                        answer.size(k, groups.len());
                        Ok(())
                    }
                    QUERY_GROUP_NAMES => {
                        let names: Vec<String> = groups.iter().map(|(n, _)| n.clone()).collect();
                        answer.strings(k, &names)
                    }
                    QUERY_GROUP_MEMBERSHIP => {
                        members_of(&mut answer, k, &groups, q.qual(GROUP_ID));
                        Ok(())
                    }
                    // Every process is on this node: the local table is the
                    // table.
                    QUERY_PROC_TABLE | QUERY_LOCAL_PROC_TABLE => {
                        let job = match q.qual(NSPACE) {
                            Some(ns) => server.job_index(ns),
                            None => requester,
                        };
                        match job {
                            Some(j) => {
                                let rows = self.proc_table(j, server, procs);
                                answer.proc_table(k, &rows)
                            }
                            None => Ok(()),
                        }
                    }
                    other => {
                        tracing::debug!("PMIx query of {other} by {nspace}: not answered");
                        Ok(())
                    }
                };
                if let Err(e) = put {
                    tracing::warn!("PMIx query of {k}: {e}");
                }
            }
        }
        done.complete(answer);
    }
}

impl PmixHost {
    /// The proc table of `job`: per rank its namespace, rank, hostname,
    /// executable, pid (0 until started), exit code and state.
    #[allow(clippy::type_complexity)]
    fn proc_table(
        &self,
        job: fastpmi_server::JobIdx,
        server: &Server,
        procs: &Procs,
    ) -> Vec<(String, u32, String, String, i32, i32, u8)> {
        let id = server.job_id(job).to_string();
        let host = self.hostname.clone();
        let size = server.job_size(job);
        let mut rows: Vec<_> = (0..size)
            .map(|r| (id.clone(), r, host.clone(), String::new(), 0, 0, 0u8))
            .collect();
        for p in procs.of_job(job) {
            let Some(row) = rows.get_mut(p.rank as usize) else {
                continue;
            };
            row.3 = p.exe.display().to_string();
            row.4 = p.pid as i32;
            (row.5, row.6) = match p.status {
                Some(s) => (os::status_code(s), PMIX_PROC_STATE_TERMINATED),
                None if server.rank_connected(job, p.rank) => (0, PMIX_PROC_STATE_CONNECTED),
                None => (0, PMIX_PROC_STATE_RUNNING),
            };
        }
        rows
    }
}

/// Answer `key` with the members of the set named `want` among `sets`
/// (nothing when it names none).
fn members_of(
    answer: &mut InfoList,
    key: &str,
    sets: &[(String, Vec<(String, u32)>)],
    want: Option<&str>,
) {
    if let Some((_, members)) = want.and_then(|w| sets.iter().find(|(n, _)| n == w)) {
        answer.procs(key, members.iter().map(|(ns, r)| proc_of(ns, *r)).collect());
    }
}
