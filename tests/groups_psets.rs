//! Process sets (docs/groups.md) with real processes through Slurm's
//! unmodified libpmi2, the C extension and the Rust client; and groups and
//! psets under Hydra (Debian's mpiexec.hydra), where every group call is
//! "not supported".

mod common;
mod rank_role;

use std::time::Duration;

use common::{heavy, launch, lib_env, prog, Prog};
use fastpmi_client::{PmiError, NOT_SUPPORTED};
use rank_role::{ensure, finish, init, role};

fn role_psets() -> Result<(), String> {
    let pmi = init()?;
    println!(
        "rank {} names={} mine={} ocean={:?} nosuch={:?}",
        pmi.rank(),
        pmi.pset_names().map_err(|e| e.to_string())?.join(","),
        pmi.my_psets().map_err(|e| e.to_string())?.join(","),
        pmi.pset_members("ocean").map_err(|e| e.to_string())?,
        pmi.pset_members("nosuch").map_err(|e| e.to_string())?
    );
    pmi.finalize().map_err(|e| e.to_string())
}

fn pset_args(a: &[String], b: &[String]) -> Vec<String> {
    let mut v: Vec<String> = ["-n", "4", "--pset", "ocean,both"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(a.iter().cloned());
    v.extend([":", "-n", "3", "--pset", "ice", "--pset", "both"].map(String::from));
    v.extend(b.iter().cloned());
    v
}

/// --pset through Slurm's unmodified libpmi2 (PMI2_Info_GetJobAttr), the
/// C extension and the Rust client; ranks 0-3 in ocean and both, 4-6 in ice
/// and both.
#[test]
fn pset_attributes_through_slurm_libpmi2_fpmi_and_rust() {
    if role().is_some() {
        finish(role_psets());
    }
    let _g = heavy();
    let slurm = prog(Prog::PsetSlurm).display().to_string();
    let s = std::slice::from_ref(&slurm);
    let out = launch(pset_args(s, s)).run();
    out.assert_success();
    let mut lines = out.stdout_lines();
    lines.sort();
    assert_eq!(lines.len(), 7, "{}", out.report());
    for r in 0..7 {
        let mine = if r < 4 { "ocean,both" } else { "both,ice" };
        let want = format!("rank {r} names=ocean,both,ice mine={mine} ocean=0-3 ice=4-6");
        assert!(lines.contains(&want.as_str()), "{want}\n{}", out.report());
    }

    let fpmi = prog(Prog::FpmiGroups).display().to_string();
    let a = [fpmi.clone(), "pset".into()];
    let out = lib_env(launch(pset_args(&a, &a))).run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert!(
        lines.contains(&"rank 5 mine=both,ice names=ocean,both,ice ocean=0,1,2,3 found=1 nosuch=0"),
        "{}",
        out.report()
    );

    let me: Vec<String> = std::iter::once(rank_role::me())
        .chain(rank_role::args(
            "pset_attributes_through_slurm_libpmi2_fpmi_and_rust",
        ))
        .collect();
    let out = launch(pset_args(&me, &me))
        .env(rank_role::ROLE, "psets")
        .run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert!(
        lines.contains(
            &"rank 2 names=ocean,both,ice mine=ocean,both ocean=Some([0, 1, 2, 3]) nosuch=None"
        ),
        "{}",
        out.report()
    );
    assert!(
        lines.contains(
            &"rank 6 names=ocean,both,ice mine=both,ice ocean=Some([0, 1, 2, 3]) nosuch=None"
        ),
        "{}",
        out.report()
    );
}

fn role_unsupported() -> Result<(), String> {
    let pmi = init()?;
    let unsupported = |what: &str, e: Option<PmiError>| match e {
        Some(PmiError::Unsupported(m)) if m.contains(NOT_SUPPORTED) => Ok(()),
        other => Err(format!("{what}: {other:?}")),
    };
    let t = Duration::from_millis(10);
    unsupported("construct", pmi.group_construct("g", &[pmi.rank()]).err())?;
    unsupported("fence", pmi.group_fence("g").err())?;
    unsupported("destruct", pmi.group_destruct("g").err())?;
    unsupported("invite", pmi.group_invite("g", &[], t).err())?;
    unsupported("join", pmi.group_join("g", 0, true, t).err())?;
    unsupported("leave", pmi.group_leave("g").err())?;
    // psets are plain job attributes: none under Hydra.
    ensure(
        pmi.pset_names().map_err(|e| e.to_string())?.is_empty(),
        || "psets under Hydra".into(),
    )?;
    pmi.fence().map_err(|e| e.to_string())?;
    println!("rank {} unsupported ok", pmi.rank());
    pmi.finalize().map_err(|e| e.to_string())
}

/// Under Hydra (Debian's mpiexec.hydra), which ends a job on an unknown PMI
/// command: every group call of the Rust client and of the C extension
/// returns the documented "not supported" error, and the job finishes.
#[test]
fn under_hydra_every_group_call_is_not_supported() {
    if role().is_some() {
        finish(role_unsupported());
    }
    let _g = heavy();
    let mut args: Vec<String> = vec!["-n".into(), "2".into(), rank_role::me()];
    args.extend(rank_role::args(
        "under_hydra_every_group_call_is_not_supported",
    ));
    let out = launch(&args)
        .program("mpiexec.hydra")
        .env(rank_role::ROLE, "unsupported")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    let mut lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("rank "))
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        vec!["rank 0 unsupported ok", "rank 1 unsupported ok"],
        "{}",
        out.report()
    );
    let exe = prog(Prog::FpmiGroups).display().to_string();
    let out = lib_env(launch(["-n", "2", &exe, "unsupported"]))
        .program("mpiexec.hydra")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["fpmi unsupported ok"],
        "{}",
        out.report()
    );
}
