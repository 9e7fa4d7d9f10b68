//! Parsing of launches, MPMD sections, errors and process sets.

use std::ffi::OsString;
use std::path::PathBuf;

use super::*;
use fastpmi_segment::MemPool;

fn p(s: &str) -> Result<Command, CliError> {
    parse(s.split_whitespace().map(OsString::from))
}

#[test]
fn simple_and_mpmd() {
    let Command::Run(c) = p("-n 4 -genv A 1 -l ./a x y : -n 3 -env B 2 -wdir /tmp ./b").unwrap()
    else {
        panic!()
    };
    assert_eq!(c.apps.len(), 2);
    assert_eq!(
        (c.apps[0].nranks, c.apps[0].program.to_str()),
        (4, Some("./a"))
    );
    assert_eq!(
        c.apps[0].args,
        vec![OsString::from("x"), OsString::from("y")]
    );
    assert_eq!(c.apps[1].nranks, 3);
    assert_eq!(
        c.apps[1].env,
        vec![(OsString::from("B"), OsString::from("2"))]
    );
    assert_eq!(c.apps[1].wdir, Some(PathBuf::from("/tmp")));
    assert_eq!(c.genv, vec![(OsString::from("A"), OsString::from("1"))]);
    assert!(c.label);
    assert_eq!(c.world_size(), 7);
}

#[test]
fn program_args_may_look_like_options() {
    let Command::Run(c) = p("-np 2 prog -n 5 --label").unwrap() else {
        panic!()
    };
    assert_eq!(c.apps[0].nranks, 2);
    assert_eq!(c.apps[0].args.len(), 3);
    assert!(!c.label);
}

#[test]
fn errors() {
    for bad in [
        "",
        "-n",
        "-n x ./a",
        "-n 0 ./a",
        "-genv A",
        "--frob ./a",
        "-n 2",
        "./a : -n 2",
        ": ./a",
    ] {
        assert!(p(bad).is_err(), "{bad:?} should fail");
    }
    assert_eq!(
        p("demo -n 8").unwrap(),
        Command::Demo {
            nranks: 8,
            cfg: LaunchConfig::default()
        }
    );
    let Command::Demo { cfg, .. } = p("demo --stats --mem-pool sysv -n 2").unwrap() else {
        panic!()
    };
    assert!(cfg.stats && cfg.mem_pool == Some(MemPool::Sysv));
    assert_eq!(p("--help").unwrap(), Command::Help);
    assert_eq!(
        p("nameserver --port 0").unwrap(),
        Command::NameServer {
            bind: "127.0.0.1".into(),
            port: 0
        }
    );
    assert!(p("nameserver --port x").is_err());
    assert!(p("--nameserver nohostport ./a").is_err());
    let Command::Run(c) = p("--nameserver localhost:7000 ./a").unwrap() else {
        panic!()
    };
    assert_eq!(c.nameserver.as_deref(), Some("localhost:7000"));
}

#[test]
fn psets() {
    let Command::Run(c) =
        p("--tolerate-group-failures -n 4 --pset ocean,all ./o : -n 3 --pset ice --pset all ./i")
            .unwrap()
    else {
        panic!()
    };
    assert!(c.tolerate_group_failures);
    assert_eq!(c.apps[0].psets, vec!["ocean", "all"]);
    assert_eq!(c.apps[1].psets, vec!["ice", "all"]);
    let sets = crate::config::psets::of_config(&c);
    assert_eq!(
        sets,
        vec![
            ("ocean".to_string(), vec![0, 1, 2, 3]),
            ("all".to_string(), (0..7).collect()),
            ("ice".to_string(), vec![4, 5, 6]),
        ]
    );
    for bad in [
        "--pset ./a",
        "--pset a;b ./a",
        "--pset a,,b ./a",
        "./a : --pset x",
    ] {
        assert!(p(bad).is_err(), "{bad:?} should fail");
    }
    let long = format!("--pset {} ./a", "x".repeat(60));
    assert!(p(&long).is_err());
}

#[test]
fn tool_subcommands() {
    assert_eq!(
        p("checkpoint 4242").unwrap(),
        Command::Checkpoint {
            target: "4242".into(),
            socket: None
        }
    );
    assert_eq!(
        p("release fastpmi_1_0 --socket /s").unwrap(),
        Command::Release {
            target: "fastpmi_1_0".into(),
            socket: Some("/s".into())
        }
    );
    assert!(p("checkpoint").unwrap_err().0.contains("checkpoint needs"));
    assert!(p("checkpoint 1 --json").is_err());
    assert!(matches!(
        p("ps --json").unwrap(),
        Command::Ps { json: true, .. }
    ));
}
