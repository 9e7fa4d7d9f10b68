//! Node and job attributes: put, get (with wait), integer arrays, job
//! attributes, from the segment or over the wire.

use super::*;
use fastpmi_codec::names::attr;

impl Pmi {
    /// Put a node attribute, visible to every rank of the node.
    pub fn put_node_attr(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), PmiError> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.live()?;
        self.check_kv(key, Some(value))?;
        if let Some(shm) = self.shm() {
            if let Some(st) = self.state() {
                st.count_node_attr_op();
                st.set_last_op(RankOp::PutNodeAttr);
            }
            match shm.seg.seg().node_attrs().put(key, value, &SharedFutex) {
                Ok(_) => return Ok(()),
                Err(KvsError::Aborted(a)) => return Err(aborted(a)),
                Err(KvsError::TableFull { .. } | KvsError::ArenaFull { .. })
                    if value.len() <= fastpmi_codec::VALLEN_MAX => {}
                Err(e) => return Err(PmiError::InvalidArg(e.to_string())),
            }
        }
        self.with(|t| match t {
            Peer::Wire(c) => {
                let req = Request::PutNodeAttr {
                    key: key.to_vec(),
                    value: value.to_vec(),
                };
                c.call(Protocol::Pmi2, &req, req.response()).map(|_| ())
            }
            Peer::Local(l) => {
                l.node.insert(key.to_vec(), value.to_vec());
                Ok(())
            }
        })
    }

    /// Read a node attribute; with `wait`, block until some rank puts it
    /// (or the job aborts). A singleton has no other rank to wait for: a
    /// missing attribute is reported missing at once instead of hanging.
    pub fn get_node_attr(
        &self,
        key: impl AsRef<[u8]>,
        wait: bool,
    ) -> Result<Option<Vec<u8>>, PmiError> {
        let key = key.as_ref();
        self.live()?;
        self.check_kv(key, None)?;
        if let Some(shm) = self.shm() {
            if let Some(st) = self.state() {
                st.count_node_attr_op();
                st.set_last_op(RankOp::GetNodeAttr);
            }
            let attrs = shm.seg.seg().node_attrs();
            if let Some(v) = attrs.get(key) {
                return Ok(Some(v.to_vec()));
            }
            if !self.overflowed(&shm.seg) {
                if !wait {
                    return Ok(None);
                }
                let st = self.state();
                if let Some(st) = st {
                    st.set_wait_key(key);
                    st.set_phase_at(RankPhase::WaitingNodeAttr, self.stamp());
                }
                let r = attrs.get_wait(key, &SharedFutex, None);
                if let Some(st) = st {
                    st.set_phase_at(RankPhase::Running, self.stamp());
                }
                return match r {
                    Ok(v) => Ok(Some(v.to_vec())),
                    Err(WaitError::Aborted(a)) => Err(aborted(a)),
                    Err(e) => Err(PmiError::InvalidArg(e.to_string())),
                };
            }
        }
        self.with(|t| match t {
            Peer::Wire(c) => {
                let req = Request::GetNodeAttr {
                    key: key.to_vec(),
                    wait,
                };
                let m = c.call(Protocol::Pmi2, &req, req.response())?;
                Ok(found_value(&m))
            }
            Peer::Local(l) => Ok(l.node.get(key).cloned()),
        })
    }

    /// An integer-array node attribute such as `localRanks` or
    /// `localRanksCount` (comma-separated on the wire).
    pub fn node_attr_int_array(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<i64>>, PmiError> {
        let key = key.as_ref();
        let singleton = self.transport() == TransportKind::Singleton;
        let v = match key {
            k if singleton && k == attr::LOCAL_RANKS_COUNT.as_bytes() => Some(b"1".to_vec()),
            k if singleton && k == attr::LOCAL_RANKS.as_bytes() => Some(b"0".to_vec()),
            _ => self.get_node_attr(key, false)?,
        };
        let Some(v) = v else { return Ok(None) };
        let text = String::from_utf8_lossy(&v);
        text.split(',')
            .map(|x| {
                x.trim().parse::<i64>().map_err(|_| {
                    PmiError::Protocol(format!("node attribute is not an integer list: {text}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Read a job attribute such as `PMI_process_mapping` or `universeSize`.
    pub fn job_attr(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>, PmiError> {
        let key = key.as_ref();
        self.live()?;
        self.check_kv(key, None)?;
        if key == attr::DEAD_PROCESSES.as_bytes() {
            if let Some(v) = self.segment_dead_processes() {
                return Ok(v);
            }
        }
        let size = self.size;
        self.with(|t| match t {
            Peer::Wire(c) => {
                let req = Request::GetJobAttr { key: key.to_vec() };
                let m = c.call(Protocol::Pmi2, &req, req.response())?;
                Ok(found_value(&m))
            }
            Peer::Local(_) => Ok(match key {
                k if k == attr::PROCESS_MAPPING.as_bytes() => {
                    Some(attr::single_node_mapping(size).into_bytes())
                }
                k if k == attr::UNIVERSE_SIZE.as_bytes() => Some(b"1".to_vec()),
                _ => None,
            }),
        })
    }
}
