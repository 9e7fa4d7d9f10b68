//! The machinery of the command table ([`crate::command`]'s table): what a command
//! looks like in one protocol ([`Form`]), the trait of request types that
//! read and write their own pairs ([`WireCodec`]), and the `wire_table!`
//! macro that turns the table into the [`crate::command::Request`] enum, its
//! decoder, its encoder and its name lookups.

pub mod fields;

use crate::{Message, WireError};

/// The PMI-2 reply to command `$name`: `<name>-response`, for every command.
macro_rules! pmi2_reply {
    ($name:literal) => {
        concat!($name, "-response")
    };
}

/// The PMI-1 reply to command `$name` where MPICH gives it no other name
/// (and to commands the server does not know): `<name>_result`.
macro_rules! pmi1_reply {
    ($name:literal) => {
        concat!($name, "_result")
    };
}

/// A PMI-2 [`Form`] with nothing but its name (the group extension's).
macro_rules! pmi2_form {
    ($name:literal) => {
        $crate::form::Form {
            name: $name,
            reply: pmi2_reply!($name),
            before: &[],
            info: $crate::form::Info::None,
        }
    };
}

/// What follows `<name>` in every PMI-2 reply name.
pub const PMI2_REPLY_SUFFIX: &str = pmi2_reply!("");

/// One command in one protocol: what it is called, and what its replies are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// The command's name on the wire (`cmd=`).
    pub name: &'static str,
    /// The reply that ends it (also the one that carries a failure).
    pub reply: &'static str,
    /// Replies that may come before [`Form::reply`], under names of their
    /// own: a port-mode challenge, a `kvs-getall`'s count and pairs.
    pub before: &'static [&'static str],
    /// PMI-1's name service: what its replies add to `rc=`.
    pub info: Info,
}

/// The `info=` PMI-1's name-service replies carry beside `rc=`
/// (`publish_result rc=0 info=ok`), as MPICH's clients read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Info {
    /// No `info=`.
    None,
    /// `info=ok` on success, `info=fail` on failure (publish, unpublish).
    OkAndFail,
    /// `info=fail` on failure; a success says it with its port (lookup).
    Fail,
}

/// A request type that reads and writes its own pairs, for a command
/// whose pairs are no fixed list of fields: spawn (numbered keys per
/// application), the group extension (six commands in one type).
pub trait WireCodec: Sized {
    /// Its commands in PMI-2, one form each.
    const PMI2: &'static [Form];
    /// This request's form, one of [`WireCodec::PMI2`].
    fn form(&self) -> &'static Form;
    /// Reads a message whose command is one of [`WireCodec::PMI2`]'s.
    fn decode(msg: &Message) -> Result<Self, WireError>;
    /// Writes its pairs (the message is named already).
    fn encode(&self, msg: &mut Message);
}

/// One operation on one form of the table, given as written there:
///
/// ```text
/// [ "name" => "reply" before [R1, R2] info OkAndFail
///   { field: Kind = "key", ... }
///   implied { field: value, ... }
///   also { "key" = "value", ... } ]
/// ```
///
/// All but the name are optional (the reply defaults to the protocol's
/// rule); `[]` is no form. `implied` gives fields the form does not carry,
/// `also` pairs it writes after the fields and never reads. The operations
/// expand to statements, not match arms: a form that is absent leaves
/// nothing behind, and a row's `#[cfg]` can cover what its forms make.
macro_rules! wire_form {
    // The form itself, for `Command::forms`.
    (@forms $p:ident []) => {
        &[]
    };
    (@forms $p:ident [
        $name:literal $(=> $reply:literal)? $(before [$($b:expr),* $(,)?])? $(info $info:ident)?
        $({ $($f:ident : $k:ty = $w:expr),* $(,)? })?
        $(implied { $($if:ident : $iv:expr),* $(,)? })?
        $(also { $($aw:literal = $av:literal),* $(,)? })?
    ]) => {{
        const FORM: &[$crate::form::Form] = &[$crate::form::Form {
            name: $name,
            reply: wire_form!(@reply $p $name $($reply)?),
            before: &[$($($b),*)?],
            info: wire_form!(@info $($info)?),
        }];
        FORM
    }};
    (@reply pmi1 $name:literal) => { pmi1_reply!($name) };
    (@reply pmi2 $name:literal) => { pmi2_reply!($name) };
    (@reply $p:ident $name:literal $reply:literal) => { $reply };
    (@info) => { $crate::form::Info::None };
    (@info $info:ident) => { $crate::form::Info::$info };

    // `return Some(form)` if `$cmd` is this form's name in `$proto`.
    (@named $p:ident, $proto:ident, $cmd:ident, $c:ident, []) => {};
    (@named $p:ident, $proto:ident, $cmd:ident, $c:ident, [$name:literal $($rest:tt)*]) => {
        if $proto == wire_form!(@proto $p) && $cmd == $name {
            return Command::$c.forms($proto).first();
        }
    };
    (@proto pmi1) => { $crate::Protocol::Pmi1 };
    (@proto pmi2) => { $crate::Protocol::Pmi2 };

    // `return` the request if `$msg` is this form in `$proto`. Fields are
    // read in the order the variant declares them (each by a closure,
    // called in the struct literal), not in the order the form writes
    // them: which of several bad fields a message is refused for must not
    // change with the wire order (PMI-2 writes a put's value first).
    (@decode $p:ident, $proto:ident, $msg:ident, $v:ident $({ $($vf:ident),* })?, []) => {};
    (@decode $p:ident, $proto:ident, $msg:ident, $v:ident $({ $($vf:ident),* })?, [
        $name:literal $(=> $reply:literal)? $(before [$($b:expr),* $(,)?])? $(info $info:ident)?
        $({ $($f:ident : $k:ty = $w:expr),* $(,)? })?
        $(implied { $($if:ident : $iv:expr),* $(,)? })?
        $(also { $($aw:literal = $av:literal),* $(,)? })?
    ]) => {
        if $proto == wire_form!(@proto $p) && $msg.cmd == $name {
            $($(let $f = || <$k as $crate::form::fields::Field>::read($msg, $w);)*)?
            $($(let $if = || -> Result<_, WireError> { Ok($iv) };)*)?
            return Ok(Some(Request::$v $({ $($vf: $vf()?),* })?));
        }
    };

    // `return` the message if `$req` has this form in `$proto`.
    (@encode $p:ident, $proto:ident, $req:ident, $v:ident $({ $($vf:ident),* })?, []) => {};
    (@encode $p:ident, $proto:ident, $req:ident, $v:ident $({ $($vf:ident),* })?, [
        $name:literal $(=> $reply:literal)? $(before [$($b:expr),* $(,)?])? $(info $info:ident)?
        $({ $($f:ident : $k:ty = $w:expr),* $(,)? })?
        $(implied { $($if:ident : $iv:expr),* $(,)? })?
        $(also { $($aw:literal = $av:literal),* $(,)? })?
    ]) => {
        if let (wire_form!(@proto $p), Request::$v $({ $($vf),* })?) = ($proto, $req) {
            #[allow(unused_mut)] // a form without pairs
            let mut m = Message::new($name);
            $($(<$k as $crate::form::fields::Field>::write($f, &mut m, $w);)*)?
            $($(let _ = $if;)*)?
            $($(m.push($aw, $av);)*)?
            return Some(m);
        }
    };
}

/// The command table: the [`crate::command::Request`] enum with one variant per
/// row, [`crate::command::Command`] naming the rows, each row's [`Form`]s, and
/// from these the decoder (`decode`), the encoder (`encode`) and the
/// lookup of a form by name (`form_named`).
///
/// `commands` rows are `Variant as "label" { fields }` (the label names it
/// in logs and errors) with a `pmi1 [...]` and a `pmi2 [...]` form (see
/// `wire_form!`); doc comments and one `#[cfg(...)]` may precede a row.
/// `codecs` rows are `Variant(Type)` for a [`WireCodec`] type, with a
/// `pmi1 [...]` form that only names a command arriving in a frame of its
/// own (`mcmd=spawn`, read by [`crate::command::decode_frame`]).
macro_rules! wire_table {
    (
        commands {
            $(
                $(#[doc = $doc:literal])*
                $(#[cfg($cfg:meta)])?
                $v:ident as $label:literal $({ $($(#[doc = $fdoc:literal])* $vf:ident : $vt:ty),* $(,)? })?
                    pmi1 $p1:tt
                    pmi2 $p2:tt
            )*
        }
        codecs {
            $(
                $(#[doc = $wdoc:literal])*
                $w:ident($t:ty) pmi1 $wp1:tt
            )*
        }
    ) => {
        /// A request as both protocols mean it: PMI-1 `put` and PMI-2
        /// `kvs-put` are both [`Request::Put`]. One variant per row of the
        /// command table (`command/table.rs`).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Request {
            $(
                $(#[doc = $doc])*
                $(#[cfg($cfg)])?
                $v $({ $($(#[doc = $fdoc])* $vf: $vt),* })?,
            )*
            $(
                $(#[doc = $wdoc])*
                $w($t),
            )*
        }

        /// A row of the command table: which command a [`Request`] is.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Command {
            $(
                #[doc = concat!("[`Request::", stringify!($v), "`]")]
                $(#[cfg($cfg)])?
                $v,
            )*
            $(
                #[doc = concat!("[`Request::", stringify!($w), "`]")]
                $w,
            )*
        }

        // A row with no form could be neither sent nor received.
        $(
            $(#[cfg($cfg)])?
            const _: () = assert!(
                !Command::$v.forms(Protocol::Pmi1).is_empty()
                    || !Command::$v.forms(Protocol::Pmi2).is_empty(),
                concat!("command ", stringify!($v), " has no form")
            );
        )*

        impl Command {
            /// Its forms in `proto`: none where the protocol lacks it, one
            /// for most, one per command for a [`WireCodec`] family.
            pub const fn forms(self, proto: Protocol) -> &'static [Form] {
                match (self, proto) {
                    $(
                        $(#[cfg($cfg)])?
                        (Command::$v, Protocol::Pmi1) => wire_form!(@forms pmi1 $p1),
                        $(#[cfg($cfg)])?
                        (Command::$v, Protocol::Pmi2) => wire_form!(@forms pmi2 $p2),
                    )*
                    $(
                        (Command::$w, Protocol::Pmi1) => wire_form!(@forms pmi1 $wp1),
                        (Command::$w, Protocol::Pmi2) => <$t as WireCodec>::PMI2,
                    )*
                }
            }
        }

        impl Request {
            /// Its row in the table.
            pub fn command(&self) -> Command {
                match self {
                    $($(#[cfg($cfg)])? Request::$v { .. } => Command::$v,)*
                    $(Request::$w(_) => Command::$w,)*
                }
            }

            /// Its short name, for logs and errors.
            pub fn label(&self) -> &'static str {
                match self {
                    $($(#[cfg($cfg)])? Request::$v { .. } => $label,)*
                    $(Request::$w(r) => r.form().name,)*
                }
            }

            /// Its form in `proto`, `None` where the protocol lacks it.
            pub fn form(&self, proto: Protocol) -> Option<&'static Form> {
                match (self, proto) {
                    $((Request::$w(r), Protocol::Pmi2) => Some(r.form()),)*
                    _ => self.command().forms(proto).first(),
                }
            }
        }

        /// The form of command `cmd` (as sent) in `proto`, if the table has it.
        pub fn form_named(proto: Protocol, cmd: &str) -> Option<&'static Form> {
            $(
                $(#[cfg($cfg)])?
                wire_form!(@named pmi1, proto, cmd, $v, $p1);
                $(#[cfg($cfg)])?
                wire_form!(@named pmi2, proto, cmd, $v, $p2);
            )*
            $(
                wire_form!(@named pmi1, proto, cmd, $w, $wp1);
                if proto == Protocol::Pmi2 {
                    if let Some(f) = <$t as WireCodec>::PMI2.iter().find(|f| f.name == cmd) {
                        return Some(f);
                    }
                }
            )*
            None
        }

        /// The request `msg` carries in `proto`; `None` if the protocol has
        /// no such command (or, for a PMI-1 `spawn`, no such line).
        #[allow(clippy::redundant_closure_call)]
        pub(super) fn decode(proto: Protocol, msg: &Message) -> Result<Option<Request>, WireError> {
            $(
                $(#[cfg($cfg)])?
                wire_form!(@decode pmi1, proto, msg, $v $({ $($vf),* })?, $p1);
                $(#[cfg($cfg)])?
                wire_form!(@decode pmi2, proto, msg, $v $({ $($vf),* })?, $p2);
            )*
            $(
                if proto == Protocol::Pmi2 && <$t as WireCodec>::PMI2.iter().any(|f| f.name == msg.cmd) {
                    return <$t as WireCodec>::decode(msg).map(|r| Some(Request::$w(r)));
                }
            )*
            Ok(None)
        }

        /// `req` as a message (without `thrid`) in `proto`; `None` where the
        /// protocol lacks the command.
        pub(super) fn encode(proto: Protocol, req: &Request) -> Option<Message> {
            $(
                $(#[cfg($cfg)])?
                wire_form!(@encode pmi1, proto, req, $v $({ $($vf),* })?, $p1);
                $(#[cfg($cfg)])?
                wire_form!(@encode pmi2, proto, req, $v $({ $($vf),* })?, $p2);
            )*
            $(
                if let (Protocol::Pmi2, Request::$w(r)) = (proto, req) {
                    let mut m = Message::new(r.form().name);
                    r.encode(&mut m);
                    return Some(m);
                }
            )*
            None
        }
    };
}
