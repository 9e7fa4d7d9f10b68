//! Name service (publish, unpublish, lookup) and connecting to other jobs.

use super::*;

impl Pmi {
    /// Publish `port` under `service` in the launcher's name service.
    pub fn publish(&self, service: &str, port: &str) -> Result<(), PmiError> {
        let req = Request::Publish {
            service: service.into(),
            port: port.into(),
        };
        self.wire(&req, req.response()).map(|_| ())
    }

    /// Remove a published service.
    pub fn unpublish(&self, service: &str) -> Result<(), PmiError> {
        let req = Request::Unpublish {
            service: service.into(),
        };
        self.wire(&req, req.response()).map(|_| ())
    }

    /// Look a service up; `None` if nobody published it. A name service
    /// that fails (e.g. an unreachable shared name server) is an error.
    pub fn lookup(&self, service: &str) -> Result<Option<String>, PmiError> {
        let req = Request::Lookup {
            service: service.into(),
        };
        match self.wire(&req, req.response()) {
            Ok(m) if m.get_bool("found") == Some(false) => Ok(None),
            Ok(m) => Ok(m.get_str("port").or(m.get_str("value")).map(str::to_string)),
            Err(e) => Err(e),
        }
    }

    /// Connect to another job of the same launcher (its KVS is then read
    /// with [`Pmi::get_from`]).
    pub fn job_connect(&self, jobid: &str) -> Result<(), PmiError> {
        // slurmstepd logs "job connect not implemented" and never replies.
        self.not_on_slurm("job-connect")?;
        let req = Request::JobConnect {
            jobid: jobid.into(),
        };
        self.wire(&req, req.response()).map(|_| ())
    }

    pub fn job_disconnect(&self, jobid: &str) -> Result<(), PmiError> {
        self.not_on_slurm("job-disconnect")?;
        let req = Request::JobDisconnect {
            jobid: jobid.into(),
        };
        self.wire(&req, req.response()).map(|_| ())
    }
}
