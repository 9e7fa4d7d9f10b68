//! The wire commands, one row each, as MPICH keeps them in one table: the
//! typed request (its variant and fields), its short label, and per
//! protocol its name, its reply's name and how each field is written on
//! the wire. The decoder, the encoder and every lookup of a command's or
//! a reply's name are made from this table and nothing else, so a new
//! command is one row here and one handler in the server.
//!
//! A form (`pmi1 [...]`, `pmi2 [...]`, see `wire_form!` in `crate::form`)
//! lists the fields in the order they are written; field kinds are in
//! [`crate::form::fields`]. `[]`: the protocol has no such command.

use crate::form::fields::*;
use crate::form::{Form, WireCodec};
use crate::group::GroupRequest;
use crate::spawn::SpawnRequest;
use crate::WireError;
use crate::{Message, Protocol};

/// Reply names used on their own: those of replies that are not their
/// request's (`<request>-response`), and the ends of a `kvs-getall` and a
/// `kvs-putall`, which answer more than one message.
pub mod replies {
    use crate::command::table::Command;
    use crate::Protocol;

    /// Port mode's challenge, before the reply to `fullinit` or `init_oob`
    /// (both protocols).
    pub const AUTH_CHALLENGE: &str = "auth-response";
    /// `kvs-getall`: how many pairs follow.
    pub const GETALL_COUNT: &str = "kvs-getall-paircount-response";
    /// `kvs-getall`: one pair.
    pub const GETALL_PAIR: &str = "kvs-getall-pair-response";
    /// `kvs-getall`'s end, its own reply.
    pub const GETALL_END: &str = Command::GetAll.forms(Protocol::Pmi2)[0].reply;
    /// The end of a `kvs-putall` and its pairs: the `kvs-putall`'s reply,
    /// also when it answers the last pair.
    pub const PUTALL_END: &str = Command::PutAll.forms(Protocol::Pmi2)[0].reply;
}

use replies::{AUTH_CHALLENGE, GETALL_COUNT, GETALL_PAIR};

wire_table! {
    commands {
        /// `cmd=init pmi_version=V pmi_subversion=S` (both protocols start
        /// so, as a PMI-1 line: see [`super::request_from`]).
        Init as "init" { version: u32, subversion: u32 }
            pmi1 ["init" => "response_to_init" {
                version: Version = "pmi_version",
                subversion: Subversion = "pmi_subversion",
            }]
            pmi2 []

        /// PMI-1 port mode: `cmd=initack pmiid=R` before `init`.
        InitAck as "initack" { pmiid: i64 }
            pmi1 ["initack" => "initack" { pmiid: Int = "pmiid" }]
            pmi2 []

        /// PMI-2 `fullinit`: rank from `pmirank`, or `srcid` (Slurm with
        /// only `PMI_ID`).
        FullInit as "fullinit" {
            rank: Option<i64>,
            jobid: Option<String>,
            threaded: bool,
            /// `authtype`: the client wants to authenticate (port mode).
            auth: Option<String>,
            /// `fastpmi-continued=TRUE`: fastpmi's client, which reads
            /// continued replies (docs/continued.md); sent to fastpmi's
            /// launcher only.
            continued: bool,
        }
            pmi1 []
            pmi2 ["fullinit" before [AUTH_CHALLENGE] {
                jobid: OptText = "pmijobid",
                rank: RankOrSrcid = "pmirank",
                threaded: Flag<false> = "threaded",
                auth: OptText = "authtype",
                continued: Marker = crate::continued::FULLINIT_KEY,
            }]

        /// `cmd=init_oob pmi_version=V signal=S [pmiid=R] [authtype=T]`:
        /// opens a rank's out-of-band channel (always a PMI-1 line;
        /// docs/oob.md).
        InitOob as "init_oob" {
            version: u32,
            /// The signal to follow each notice, or None (`signal=NONE`).
            signal: Option<&'static str>,
            /// Port mode: the rank this connection claims.
            pmiid: Option<i64>,
            auth: Option<String>,
        }
            pmi1 ["init_oob" => "response_to_init_oob" before [AUTH_CHALLENGE] {
                version: Version = "pmi_version",
                signal: Signal = "signal",
                pmiid: OptInt = "pmiid",
                auth: OptText = "authtype",
            }]
            pmi2 []

        /// `auth-response-complete;authinfo=H;`: the answer to a challenge.
        AuthComplete as "auth-response-complete" { authinfo: Vec<u8> }
            pmi1 ["auth-response-complete" { authinfo: Bytes = "authinfo" }]
            pmi2 ["auth-response-complete" { authinfo: Bytes = "authinfo" }]

        GetMaxes as "get_maxes"
            pmi1 ["get_maxes" => "maxes"]
            pmi2 []

        GetAppnum as "get_appnum"
            pmi1 ["get_appnum" => "appnum"]
            pmi2 []

        /// PMI-1 `get_my_kvsname` / PMI-2 `job-getid`.
        GetJobId as "get-jobid"
            pmi1 ["get_my_kvsname" => "my_kvsname"]
            pmi2 ["job-getid"]

        GetUniverseSize as "get_universe_size"
            pmi1 ["get_universe_size" => "universe_size"]
            pmi2 []

        Put as "put" { key: Vec<u8>, value: Vec<u8> }
            pmi1 ["put" => "put_result" { key: Key = "key", value: Bytes = "value" }]
            // A client value goes before the key: a `;` in a value is
            // written `;;`, and one that ends up 7 bytes before the end of
            // the body is where MPICH 3.3-4.0's 6 bytes of garbage start, so
            // a decoder must take it as the end of the message ("x;abcd"
            // would arrive as "x"). A last pair of 6 or more bytes without
            // `;` (the key) rules it out.
            pmi2 ["kvs-put" { value: Bytes = "value", key: Key = "key" }]

        /// `jobid` None or empty = own job; `src` is a hint only.
        Get as "get" { jobid: Option<String>, src: Option<i64>, key: Vec<u8> }
            pmi1 ["get" => "get_result" {
                jobid: TextAsSent = "kvsname",
                key: Key = "key",
            } implied { src: None }]
            pmi2 ["kvs-get" {
                jobid: TextOrEmpty = "jobid",
                src: IntOr<-1> = "srcid",
                key: Key = "key",
            }]

        /// PMI-1 `barrier_in` / PMI-2 `kvs-fence`.
        Barrier as "fence"
            pmi1 ["barrier_in" => "barrier_out"]
            pmi2 ["kvs-fence"]

        PutNodeAttr as "putnodeattr" { key: Vec<u8>, value: Vec<u8> }
            pmi1 []
            // The value before the key, as for `kvs-put`.
            pmi2 ["info-putnodeattr" { value: Bytes = "value", key: Key = "key" }]

        GetNodeAttr as "getnodeattr" { key: Vec<u8>, wait: bool }
            pmi1 []
            pmi2 ["info-getnodeattr" { key: Key = "key", wait: Flag<false> = "wait" }]

        GetJobAttr as "getjobattr" { key: Vec<u8> }
            pmi1 []
            pmi2 ["info-getjobattr" { key: Key = "key" }]

        Finalize as "finalize"
            pmi1 ["finalize" => "finalize_ack"]
            pmi2 ["finalize"]

        Abort as "abort" {
            /// As sent (any integer); the server clamps it to an exit status.
            exitcode: Option<i64>,
            message: String,
            isworld: bool,
        }
            // PMI-1 clients always send an exit code (1 when none was given).
            pmi1 ["abort" => "abort_result" {
                exitcode: IntOr<1> = "exitcode",
                message: Lossy = "message",
            } implied { isworld: true }]
            pmi2 ["abort" {
                isworld: Flag<true> = "isworld",
                exitcode: OptInt = "exitcode",
                message: AbortMessage = "message",
            }]

        Publish as "publish" { service: String, port: String }
            pmi1 ["publish_name" => "publish_result" info OkAndFail {
                service: Text = "service",
                port: Text = "port",
            }]
            pmi2 ["name-publish" {
                service: Text = "name",
                port: Text = "port",
            } also { "infokeycount" = "0" }]

        Unpublish as "unpublish" { service: String }
            pmi1 ["unpublish_name" => "unpublish_result" info OkAndFail {
                service: Text = "service",
            }]
            pmi2 ["name-unpublish" { service: Text = "name" }]

        Lookup as "lookup" { service: String }
            pmi1 ["lookup_name" => "lookup_result" info Fail { service: Text = "service" }]
            pmi2 ["name-lookup" { service: Text = "name" }]

        JobConnect as "job-connect" { jobid: String }
            pmi1 []
            pmi2 ["job-connect" { jobid: Text = "jobid" }]

        JobDisconnect as "job-disconnect" { jobid: String }
            pmi1 []
            pmi2 ["job-disconnect" { jobid: Text = "jobid" }]

        /// `kvs-getall;[jobid=J;]`: every pair of the caller's job's KVS
        /// (or of connected job J), answered by a pair count, one message
        /// per pair and an end ([`super::Response::GetAllCount`],
        /// [`super::Response::GetAllPair`], [`super::Response::GetAllDone`]).
        GetAll as "kvs-getall" { jobid: Option<String> }
            pmi1 []
            pmi2 ["kvs-getall" before [GETALL_COUNT, GETALL_PAIR] { jobid: OptText = "jobid" }]

        /// `kvs-putall;paircount=N;`: the next N messages of the connection
        /// are `kvs-putall-pair`s, put as one ([`super::Response::PutAllDone`]
        /// after the last).
        PutAll as "kvs-putall" { paircount: u64 }
            pmi1 []
            pmi2 ["kvs-putall" { paircount: Count = "paircount" }]

        /// `kvs-putall-pair;key=K;value=V;`: one pair of a `kvs-putall`.
        PutAllPair as "kvs-putall-pair" { key: Vec<u8>, value: Vec<u8> }
            pmi1 []
            pmi2 ["kvs-putall-pair" { key: Key = "key", value: Bytes = "value" }]

        /// An invented command, only in this crate's tests, to show what a
        /// new one takes: this row (and, in the server, its handler).
        #[cfg(test)]
        Ping as "ping" { token: String, hops: Option<i64>, urgent: bool }
            pmi1 ["ping" => "pong" {
                token: Text = "token",
                hops: OptInt = "hops",
            } implied { urgent: false }]
            pmi2 ["job-ping" {
                urgent: Flag<false> = "urgent",
                token: Text = "token",
                hops: OptInt = "hops",
            }]
    }
    codecs {
        /// PMI-2 `spawn`, and PMI-1's `mcmd=spawn` block.
        Spawn(SpawnRequest) pmi1 ["spawn" => "spawn_result"]
        /// The group extension (`group-*`, `docs/groups.md`).
        Group(GroupRequest) pmi1 []
    }
}

impl Request {
    /// The form fastpmi's client sends this request in: PMI-2, its protocol
    /// after init, or PMI-1 for a command PMI-2 lacks (`init`, `init_oob`,
    /// `get_maxes`, ...).
    fn client_form(&self) -> Option<&'static Form> {
        self.form(Protocol::Pmi2)
            .or_else(|| self.form(Protocol::Pmi1))
    }

    /// The name of the reply that ends this request as fastpmi's client
    /// sends it (its PMI-2 form's, or its PMI-1 form's where PMI-2 lacks
    /// the command): what the client waits for.
    pub fn response(&self) -> &'static str {
        // Every row has a form (checked when the table is compiled).
        self.client_form().map_or("", |f| f.reply)
    }

    /// Replies under names of their own that may come before
    /// [`Request::response`] (a `kvs-getall`'s count and pairs).
    pub fn responses_before(&self) -> &'static [&'static str] {
        self.client_form().map_or(&[], |f| f.before)
    }
}
