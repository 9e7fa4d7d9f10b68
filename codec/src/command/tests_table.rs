//! The command table: a new wire command is its row and its handler.
//!
//! `Request::Ping` exists only in this crate's tests: its row in
//! `table.rs` (behind `#[cfg(test)]`) is all that was added for it. Below
//! it is decoded, encoded and answered in both protocols, with nothing but
//! a handler written here.

use super::*;

/// What the server's handler for the new command would be.
fn handle(req: Request) -> Response {
    match req {
        Request::Ping { token, hops, .. } => Response::Value {
            key: token.into_bytes(),
            value: Some(hops.unwrap_or(0).to_string().into_bytes()),
        },
        other => Response::error(format!("{} is not ping", other.label())),
    }
}

fn decode(proto: Protocol, wire: &[u8]) -> Decoded {
    let frame = match proto {
        Protocol::Pmi1 => Frame::Pmi1(wire.strip_suffix(b"\n").unwrap().to_vec()),
        Protocol::Pmi2 => Frame::Pmi2(wire[6..].to_vec()),
    };
    decode_frame(&frame).unwrap()
}

#[test]
fn a_new_command_is_a_row_and_a_handler() {
    let ping = Request::Ping {
        token: "t1".into(),
        hops: Some(3),
        urgent: false,
    };
    // The client's side: the forms of the row, in the row's order.
    let line = encode_request(Protocol::Pmi1, &ping);
    assert_eq!(line, b"cmd=ping token=t1 hops=3\n");
    let frame = encode_request(Protocol::Pmi2, &ping);
    assert_eq!(&frame[6..], b"cmd=job-ping;urgent=FALSE;token=t1;hops=3;");
    assert_eq!(
        &encode_request_thrid(&ping, b"4")[6..],
        b"cmd=job-ping;thrid=4;urgent=FALSE;token=t1;hops=3;"
    );
    // What the client waits for, and the names for logs.
    assert_eq!(ping.response(), "job-ping-response");
    assert_eq!(ping.responses_before(), &[] as &[&str]);
    assert_eq!(ping.form(Protocol::Pmi1).map(|f| f.reply), Some("pong"));
    assert_eq!((ping.label(), request_name(&ping)), ("ping", "ping"));
    assert_eq!(ping.command(), Command::Ping);

    // The server's side: each form decodes back to the request, and the
    // handler's answer goes out under the row's reply names.
    for (proto, wire, reply) in [
        (Protocol::Pmi1, &line, &b"cmd=pong rc=0 value=3\n"[..]),
        (
            Protocol::Pmi2,
            &frame,
            &b"cmd=job-ping-response;rc=0;value=3;found=TRUE;"[..],
        ),
    ] {
        let d = decode(proto, wire);
        assert_eq!((d.proto, d.request.as_ref()), (proto, Ok(&ping)));
        let bytes = encode_response(proto, &d.cmd, None, &handle(d.request.unwrap()));
        let body = match proto {
            Protocol::Pmi1 => &bytes[..],
            Protocol::Pmi2 => &bytes[6..],
        };
        assert_eq!(body, reply, "{}", crate::show(&bytes));
    }
}

#[test]
fn a_new_command_gets_the_field_kinds_checks() {
    // A field the form does not carry takes its implied value; one the
    // client leaves out, its kind's default.
    let d = decode(Protocol::Pmi2, b"000000cmd=job-ping;urgent=true;token=t;");
    assert_eq!(
        d.request,
        Ok(Request::Ping {
            token: "t".into(),
            hops: None,
            urgent: true
        })
    );
    let d = decode(Protocol::Pmi1, b"cmd=ping token=t hops=\n");
    assert_eq!(
        d.request,
        Ok(Request::Ping {
            token: "t".into(),
            hops: None,
            urgent: false
        })
    );
    // A required field missing, or a bad value, is refused as for any
    // command, and answered with an error under the row's reply name.
    for (proto, wire, want, reply) in [
        (
            Protocol::Pmi1,
            &b"cmd=ping hops=2\n"[..],
            WireError::MissingKey {
                cmd: "ping".into(),
                key: "token",
            },
            &b"cmd=pong rc=-1 msg=missing_required_key_\"token\"_in_ping\n"[..],
        ),
        (
            Protocol::Pmi2,
            &b"000000cmd=job-ping;token=t;hops=x;"[..],
            WireError::BadValue {
                cmd: "job-ping".into(),
                key: "hops",
                value: "x".into(),
            },
            &b"000000cmd=job-ping-response;rc=-1;errmsg=bad value for \"hops\" in job-ping: \"x\";"
                [..],
        ),
    ] {
        let d = decode(proto, wire);
        assert_eq!(d.request, Err(want.clone()));
        let bytes = encode_response(proto, &d.cmd, None, &Response::error(want.to_string()));
        let skip = if proto == Protocol::Pmi2 { 6 } else { 0 };
        assert_eq!(&bytes[skip..], &reply[skip..], "{}", crate::show(&bytes));
    }
    // Each protocol knows only its own form's name.
    let m = pmi2::decode(b"cmd=ping;token=t;").unwrap();
    assert_eq!(
        request_from(Protocol::Pmi2, &m),
        Err(WireError::UnknownCommand("ping".into()))
    );
}

#[test]
fn replies_are_named_by_the_table() {
    // Every reply name the client waits for comes from a row.
    let get = Request::Get {
        jobid: None,
        src: None,
        key: b"k".to_vec(),
    };
    assert_eq!(get.response(), "kvs-get-response");
    assert_eq!(
        get.form(Protocol::Pmi1).map(|f| f.reply),
        Some("get_result")
    );
    assert_eq!(Request::Barrier.response(), "kvs-fence-response");
    // PMI-1-only commands: their PMI-1 reply.
    assert_eq!(
        Request::Init {
            version: 2,
            subversion: 0
        }
        .response(),
        "response_to_init"
    );
    assert_eq!(Request::GetMaxes.response(), "maxes");
    let getall = Request::GetAll { jobid: None };
    assert_eq!(
        (getall.response(), getall.responses_before()),
        (
            replies::GETALL_END,
            &[replies::GETALL_COUNT, replies::GETALL_PAIR][..]
        )
    );
    assert_eq!(replies::GETALL_END, "kvs-getall-response");
    assert_eq!(
        Request::PutAll { paircount: 1 }.response(),
        replies::PUTALL_END
    );
    // A family: one form per command of the group extension.
    let fence = Request::Group(crate::group::GroupRequest::Fence { id: "g".into() });
    assert_eq!(fence.response(), "group-fence-response");
    assert_eq!(Command::Group.forms(Protocol::Pmi2).len(), 6);
    assert!(Command::Group.forms(Protocol::Pmi1).is_empty());
    // PMI-1 spawn arrives as a block of its own: named, never a line.
    assert_eq!(pmi1_reply_name("spawn"), "spawn_result");
    let line = pmi1::decode(b"cmd=spawn nprocs=1").unwrap();
    assert_eq!(
        request_from(Protocol::Pmi1, &line),
        Err(WireError::UnknownCommand("spawn".into()))
    );
    // The reply rules for commands the table does not know.
    assert_eq!(pmi1_reply_name("frob"), "frob_result");
    assert_eq!(pmi2_reply_name("frob"), "frob-response");
    // The name service's `info=` comes from the PMI-1 forms.
    assert_eq!(
        form_named(Protocol::Pmi1, "publish_name").map(|f| f.info),
        Some(Info::OkAndFail)
    );
    assert_eq!(
        form_named(Protocol::Pmi1, "lookup_name").map(|f| f.info),
        Some(Info::Fail)
    );
    assert_eq!(
        encode_response(Protocol::Pmi1, "unpublish_name", None, &Response::Ok),
        b"cmd=unpublish_result rc=0 info=ok\n"
    );
}
