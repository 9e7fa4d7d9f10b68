//! Spawn requests: PMI-1 `mcmd=spawn` blocks and PMI-2 `spawn` messages,
//! decoded into one [`SpawnRequest`] and checked against fixed limits, so
//! the server never acts on a request that is inconsistent or absurd.

use std::collections::BTreeMap;

use super::{pmi1, Message, WireError, KEYLEN_MAX, VALLEN_MAX};

/// Most processes one spawn request may start (all commands together).
pub const SPAWN_MAX_PROCS: u32 = 65536;
/// Most commands in one spawn-multiple request.
pub const SPAWN_MAX_CMDS: usize = 256;
/// Most arguments of one command (a spawn of many long arguments travels
/// as a continued command, docs/continued.md; the kernel's own limit on a
/// command line, about 2 MiB, applies when the rank starts).
pub const SPAWN_MAX_ARGS: usize = 65536;
/// Most info pairs of one command, and most pre-put pairs of a request.
pub const SPAWN_MAX_PAIRS: usize = 1024;

/// One spawn command (an `mcmd=spawn` segment or a PMI-2 `subcmd`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnCmd {
    pub exe: String,
    pub maxprocs: u32,
    pub args: Vec<String>,
    pub info: Vec<(String, String)>,
}

/// A spawn request: commands plus the pre-put KVS pairs for the new job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnRequest {
    pub cmds: Vec<SpawnCmd>,
    pub preput: Vec<(String, String)>,
}

impl SpawnRequest {
    /// Processes the request asks for, over all commands.
    pub fn total_procs(&self) -> u64 {
        self.cmds.iter().map(|c| c.maxprocs as u64).sum()
    }

    /// Check the limits every server applies before acting on a spawn.
    pub fn validate(&self) -> Result<(), WireError> {
        let bad = |m: String| Err(WireError::BadSpawn(m));
        if self.cmds.is_empty() {
            return bad("no command to spawn".into());
        }
        if self.cmds.len() > SPAWN_MAX_CMDS {
            return bad(format!(
                "{} commands (at most {SPAWN_MAX_CMDS})",
                self.cmds.len()
            ));
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if c.exe.is_empty() {
                return bad(format!("command {i}: empty program name"));
            }
            if c.maxprocs == 0 {
                return bad(format!(
                    "command {i} ({}): maxprocs=0, at least 1 process needed",
                    c.exe
                ));
            }
            if c.args.len() > SPAWN_MAX_ARGS {
                return bad(format!(
                    "command {i} ({}): {} arguments (at most {SPAWN_MAX_ARGS})",
                    c.exe,
                    c.args.len()
                ));
            }
            if c.info.len() > SPAWN_MAX_PAIRS {
                return bad(format!(
                    "command {i} ({}): {} info keys (at most {SPAWN_MAX_PAIRS})",
                    c.exe,
                    c.info.len()
                ));
            }
        }
        let total = self.total_procs();
        if total > SPAWN_MAX_PROCS as u64 {
            return bad(format!(
                "{total} processes requested (at most {SPAWN_MAX_PROCS})"
            ));
        }
        if self.preput.len() > SPAWN_MAX_PAIRS {
            return bad(format!(
                "{} pre-put pairs (at most {SPAWN_MAX_PAIRS})",
                self.preput.len()
            ));
        }
        for (k, v) in &self.preput {
            if k.is_empty() || k.len() > KEYLEN_MAX {
                return bad(format!(
                    "pre-put key of {} bytes (1 to {KEYLEN_MAX})",
                    k.len()
                ));
            }
            if v.len() > VALLEN_MAX {
                return bad(format!(
                    "pre-put value of key {k}: {} bytes (at most {VALLEN_MAX})",
                    v.len()
                ));
            }
        }
        Ok(())
    }
}

fn lossy(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// A count field: a non-negative number that fits the limit.
fn count(key: &str, v: &str, max: u64) -> Result<u64, WireError> {
    let n: i64 = v
        .trim()
        .parse()
        .map_err(|_| WireError::BadSpawn(format!("{key}={v} is not a number")))?;
    if n < 0 || n as u64 > max {
        return Err(WireError::BadSpawn(format!(
            "{key}={n} out of range (0 to {max})"
        )));
    }
    Ok(n as u64)
}

/// PMI-1 `mcmd=spawn`: one segment per command, arguments from 1.
pub(crate) fn pmi1_spawn(block: &[u8]) -> Result<SpawnRequest, WireError> {
    let segments = pmi1::decode_spawn_block(block)?;
    let mut req = SpawnRequest::default();
    if segments.len() > SPAWN_MAX_CMDS {
        return Err(WireError::BadSpawn(format!(
            "{} commands (at most {SPAWN_MAX_CMDS})",
            segments.len()
        )));
    }
    for (si, seg) in segments.iter().enumerate() {
        let get = |k: &str| {
            seg.iter()
                .find(|(key, _)| key == k.as_bytes())
                .map(|(_, v)| lossy(v))
        };
        let int = |k: &'static str, max: u64| -> Result<Option<u64>, WireError> {
            get(k).map(|v| count(k, &v, max)).transpose()
        };
        let exe = get("execname").ok_or_else(|| WireError::BadSpawn("missing execname".into()))?;
        let nprocs = int("nprocs", SPAWN_MAX_PROCS as u64)?
            .ok_or_else(|| WireError::BadSpawn("missing nprocs".into()))?;
        let argcnt = int("argcnt", SPAWN_MAX_ARGS as u64)?.unwrap_or(0) as usize;
        let mut args = Vec::with_capacity(argcnt);
        for i in 1..=argcnt {
            args.push(get(&format!("arg{i}")).ok_or_else(|| {
                WireError::BadSpawn(format!("argcnt={argcnt} but arg{i} is missing"))
            })?);
        }
        let info_num = int("info_num", SPAWN_MAX_PAIRS as u64)?.unwrap_or(0) as usize;
        let mut info = Vec::with_capacity(info_num);
        for i in 0..info_num {
            match (get(&format!("info_key_{i}")), get(&format!("info_val_{i}"))) {
                (Some(k), Some(v)) => info.push((k, v)),
                _ => {
                    return Err(WireError::BadSpawn(format!(
                        "info_num={info_num} but info_key_{i}/info_val_{i} is missing"
                    )))
                }
            }
        }
        // Older clients repeat the preput block in every segment: take it once.
        if si == 0 {
            let n = int("preput_num", SPAWN_MAX_PAIRS as u64)?.unwrap_or(0) as usize;
            for i in 0..n {
                match (
                    get(&format!("preput_key_{i}")),
                    get(&format!("preput_val_{i}")),
                ) {
                    (Some(k), Some(v)) => req.preput.push((k, v)),
                    _ => {
                        return Err(WireError::BadSpawn(format!(
                            "preput_num={n} but preput_key_{i}/preput_val_{i} is missing"
                        )))
                    }
                }
            }
        }
        req.cmds.push(SpawnCmd {
            exe,
            maxprocs: nprocs as u32,
            args,
            info,
        });
    }
    req.validate()?;
    Ok(req)
}

/// A command being read from a PMI-2 message: its declared counts and the
/// numbered argv, info keys and info values seen so far.
#[derive(Default)]
struct Partial {
    cmd: SpawnCmd,
    argc: Option<u64>,
    infocount: Option<u64>,
    argv: BTreeMap<usize, String>,
    keys: BTreeMap<usize, String>,
    vals: BTreeMap<usize, String>,
}

impl Partial {
    fn finish(self, i: usize) -> Result<SpawnCmd, WireError> {
        let Partial {
            mut cmd,
            argc,
            infocount,
            argv,
            mut keys,
            mut vals,
        } = self;
        if let Some(n) = argc {
            if n as usize != argv.len() {
                return Err(WireError::BadSpawn(format!(
                    "command {i} ({}): argc={n} but {} arguments sent",
                    cmd.exe,
                    argv.len()
                )));
            }
        }
        cmd.args = argv.into_values().collect();
        let n = infocount.map(|n| n as usize).unwrap_or(keys.len());
        if keys.len() != n || vals.len() != n {
            return Err(WireError::BadSpawn(format!(
                "command {i} ({}): infokeycount={n} but {} keys and {} values sent",
                cmd.exe,
                keys.len(),
                vals.len()
            )));
        }
        for (idx, k) in std::mem::take(&mut keys) {
            let v = vals.remove(&idx).ok_or_else(|| {
                WireError::BadSpawn(format!("command {i}: infokey{idx} without infoval{idx}"))
            })?;
            cmd.info.push((k, v));
        }
        Ok(cmd)
    }
}

/// Fail on a numbered key that would grow a table past `max` entries.
fn slot(map: &BTreeMap<usize, String>, key: &str, idx: usize, max: usize) -> Result<(), WireError> {
    if map.len() >= max && !map.contains_key(&idx) {
        return Err(WireError::BadSpawn(format!(
            "too many {key} entries (at most {max})"
        )));
    }
    Ok(())
}

/// PMI-2 `spawn`, a row of the command table (`command/table.rs`): its
/// pairs are numbered per command, no fixed list of fields.
impl crate::form::WireCodec for SpawnRequest {
    const PMI2: &'static [crate::form::Form] = &[pmi2_form!("spawn")];

    fn form(&self) -> &'static crate::form::Form {
        &Self::PMI2[0]
    }

    fn decode(msg: &Message) -> Result<Self, WireError> {
        pmi2_spawn(msg)
    }

    /// Each command's keys after its `subcmd`, in Slurm's parser's order.
    fn encode(&self, m: &mut Message) {
        m.push("ncmds", self.cmds.len().to_string());
        m.push("preputcount", self.preput.len().to_string());
        for (i, (k, v)) in self.preput.iter().enumerate() {
            m.push(&format!("ppkey{i}"), k);
            m.push(&format!("ppval{i}"), v);
        }
        for c in &self.cmds {
            m.push("subcmd", &c.exe);
            m.push("maxprocs", c.maxprocs.to_string());
            m.push("argc", c.args.len().to_string());
            for (i, a) in c.args.iter().enumerate() {
                m.push(&format!("argv{i}"), a);
            }
            m.push("infokeycount", c.info.len().to_string());
            for (i, (k, v)) in c.info.iter().enumerate() {
                m.push(&format!("infokey{i}"), k);
                m.push(&format!("infoval{i}"), v);
            }
        }
    }
}

/// PMI-2 `spawn`: each `subcmd` opens a new command. Arguments are counted
/// from 0 by Slurm and from 1 by MPICH 5: only their order matters.
fn pmi2_spawn(msg: &Message) -> Result<SpawnRequest, WireError> {
    let mut req = SpawnRequest::default();
    let mut pp_keys = BTreeMap::new();
    let mut pp_vals = BTreeMap::new();
    let mut ncmds = None;
    let mut preputcount = None;
    let mut cur: Option<Partial> = None;
    for (k, v) in &msg.pairs {
        let k = lossy(k);
        let v = lossy(v);
        let idx = |p: &str| k.strip_prefix(p).and_then(|n| n.parse::<usize>().ok());
        if k == "subcmd" {
            if let Some(c) = cur.take() {
                req.cmds.push(c.finish(req.cmds.len())?);
            }
            if req.cmds.len() >= SPAWN_MAX_CMDS {
                return Err(WireError::BadSpawn(format!(
                    "more than {SPAWN_MAX_CMDS} commands"
                )));
            }
            cur = Some(Partial {
                cmd: SpawnCmd {
                    exe: v,
                    ..Default::default()
                },
                ..Default::default()
            });
        } else if k == "ncmds" {
            ncmds = Some(count(&k, &v, SPAWN_MAX_CMDS as u64)?);
        } else if k == "preputcount" {
            preputcount = Some(count(&k, &v, SPAWN_MAX_PAIRS as u64)?);
        } else if let Some(i) = idx("ppkey") {
            slot(&pp_keys, "ppkey", i, SPAWN_MAX_PAIRS)?;
            pp_keys.insert(i, v);
        } else if let Some(i) = idx("ppval") {
            slot(&pp_vals, "ppval", i, SPAWN_MAX_PAIRS)?;
            pp_vals.insert(i, v);
        } else if let Some(c) = cur.as_mut() {
            if k == "maxprocs" {
                c.cmd.maxprocs = count(&k, &v, SPAWN_MAX_PROCS as u64)? as u32;
            } else if k == "argc" {
                c.argc = Some(count(&k, &v, SPAWN_MAX_ARGS as u64)?);
            } else if k == "infokeycount" {
                c.infocount = Some(count(&k, &v, SPAWN_MAX_PAIRS as u64)?);
            } else if let Some(i) = idx("argv") {
                slot(&c.argv, "argv", i, SPAWN_MAX_ARGS)?;
                c.argv.insert(i, v);
            } else if let Some(i) = idx("infokey") {
                slot(&c.keys, "infokey", i, SPAWN_MAX_PAIRS)?;
                c.keys.insert(i, v);
            } else if let Some(i) = idx("infoval") {
                slot(&c.vals, "infoval", i, SPAWN_MAX_PAIRS)?;
                c.vals.insert(i, v);
            }
        }
    }
    if let Some(c) = cur.take() {
        req.cmds.push(c.finish(req.cmds.len())?);
    }
    if req.cmds.is_empty() {
        return Err(WireError::BadSpawn("no subcmd".into()));
    }
    if let Some(n) = ncmds {
        if n as usize != req.cmds.len() {
            return Err(WireError::BadSpawn(format!(
                "ncmds={n} but {} subcmd sent",
                req.cmds.len()
            )));
        }
    }
    if let Some(n) = preputcount {
        if n as usize != pp_keys.len() {
            return Err(WireError::BadSpawn(format!(
                "preputcount={n} but {} ppkey sent",
                pp_keys.len()
            )));
        }
    }
    for (i, k) in pp_keys {
        let v = pp_vals
            .remove(&i)
            .ok_or_else(|| WireError::BadSpawn(format!("ppkey{i} without ppval{i}")))?;
        req.preput.push((k, v));
    }
    req.validate()?;
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmi2;

    fn dec(body: &str) -> Result<SpawnRequest, WireError> {
        pmi2_spawn(&pmi2::decode(body.as_bytes()).unwrap())
    }

    fn err(r: Result<SpawnRequest, WireError>) -> String {
        match r {
            Err(WireError::BadSpawn(m)) => m,
            other => panic!("expected a spawn error, got {other:?}"),
        }
    }

    #[test]
    fn mpich5_numbers_argv_from_one() {
        let r = dec("cmd=spawn;ncmds=1;preputcount=0;subcmd=./a;maxprocs=2;argc=2;infokeycount=0;argv1=x;argv2=y;").unwrap();
        assert_eq!(r.cmds[0].args, vec!["x", "y"]);
    }

    #[test]
    fn inconsistent_counts_are_refused() {
        assert!(err(dec("cmd=spawn;ncmds=1;subcmd=a;maxprocs=0;argc=0;")).contains("maxprocs=0"));
        assert!(err(dec("cmd=spawn;ncmds=1;subcmd=a;maxprocs=-3;")).contains("out of range"));
        assert!(
            err(dec("cmd=spawn;ncmds=1;subcmd=a;maxprocs=99999999999;")).contains("out of range")
        );
        assert!(err(dec("cmd=spawn;ncmds=1;maxprocs=2;")).contains("no subcmd"));
        assert!(
            err(dec("cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=3;argv0=x;"))
                .contains("argc=3 but 1")
        );
        assert!(err(dec("cmd=spawn;ncmds=2;subcmd=a;maxprocs=1;argc=0;")).contains("ncmds=2 but 1"));
        assert!(err(dec(
            "cmd=spawn;ncmds=1;subcmd=a;maxprocs=40000;subcmd=b;maxprocs=40000;ncmds=2;"
        ))
        .contains("processes requested"));
    }

    #[test]
    fn oversize_arguments_and_preput_are_refused() {
        let mut body = String::from("cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;argc=70000;");
        for i in 0..70000 {
            body += &format!("argv{i}=x;");
        }
        assert!(err(dec(&body)).contains("argc=70000 out of range"));
        let mut body = String::from("cmd=spawn;ncmds=1;subcmd=a;maxprocs=1;");
        for i in 0..70000 {
            body += &format!("argv{i}=x;");
        }
        assert!(err(dec(&body)).contains("too many argv"));
        let big = "v".repeat(2048);
        let body = format!(
            "cmd=spawn;ncmds=1;preputcount=1;ppkey0=k;ppval0={big};subcmd=a;maxprocs=1;argc=0;"
        );
        assert!(err(dec(&body)).contains("2048 bytes"));
    }

    #[test]
    fn pmi1_block_counts_are_checked() {
        let ok = b"mcmd=spawn\nnprocs=2\nexecname=./a\ntotspawns=1\nspawnssofar=1\nargcnt=1\narg1=x\nendcmd\n";
        assert_eq!(pmi1_spawn(ok).unwrap().cmds[0].args, vec!["x"]);
        let missing = b"mcmd=spawn\nnprocs=2\nexecname=./a\nargcnt=2\narg1=x\nendcmd\n";
        assert!(err(pmi1_spawn(missing)).contains("arg2 is missing"));
        let zero = b"mcmd=spawn\nnprocs=0\nexecname=./a\nendcmd\n";
        assert!(err(pmi1_spawn(zero)).contains("maxprocs=0"));
        let neg = b"mcmd=spawn\nnprocs=-1\nexecname=./a\nendcmd\n";
        assert!(err(pmi1_spawn(neg)).contains("out of range"));
    }
}
