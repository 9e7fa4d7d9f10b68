//! The benchmark harness end to end, at toy size: it must produce a
//! well-formed report whatever is installed. Figures are never asserted (they
//! depend on the machine); only the shape of bench.md, raw.csv and bench.svg.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Every configuration the report must account for.
const EXCHANGE: &[&str] = &[
    "fastpmi-shm",
    "fastpmi-shm-yields0",
    "fastpmi-socket",
    "hydra",
    "slurm-pmi2@fastpmi",
    "futex-floor",
];
const STARTUP: &[&str] = &["mpich@fastpmi", "mpich@hydra"];
/// Spawn latency (run here with one child).
const SPAWN: &[&str] = &["spawn@fastpmi", "spawn@hydra5"];
/// Job start-up against the posix_spawn floor (run here at N=2).
const LAUNCH: &[&str] = &[
    "launch-floor",
    "launch@fastpmi",
    "pmi2-min@fastpmi-shm",
    "pmi2-min@fastpmi-socket",
    "launch@hydra",
    "pmi2-min@hydra",
];
/// The group fence (run here in a 4-rank job).
const GROUP: &[&str] = &["group64@fastpmi-shm"];
/// The fence loop with and without `fastpmi ps`, and `ps` polled while a
/// job sits in a fence (run here in 4-rank jobs).
const PS: &[&str] = &[
    "fence-loop@fastpmi-shm",
    "fence-loop+ps@fastpmi-shm",
    "fence-sitting+ps@fastpmi-shm",
];

/// Death detection in a fault-tolerant job (run here in a 4-rank job).
const DEATH: &[&str] = &["death-detect@fastpmi-shm"];
/// raw.csv columns of the death-detection figures.
const DEATH_COLUMNS: &[&str] = &["death_first_ms", "death_last_ms", "death_margin_ms"];

/// Open MPI 5 ULFM after a SIGKILL, fastpmi vs `mpirun --with-ft ulfm`
/// (run here in 4-rank jobs when the Open MPI wheel is installed).
const ULFM: &[&str] = &["ompi5-ulfm@fastpmi", "ompi5-ulfm@mpirun"];
/// raw.csv column of the ULFM runs: survivors that printed their line.
const ULFM_COLUMNS: &[&str] = &["ulfm_survivors"];

/// Python ranks exchanging addresses, the wheel's fastpmi vs the `mpich`
/// wheel's `mpiexec`: not run here (`--python-sizes none`: the venv and
/// the wheel take minutes and PyPI), but listed as such.
const PYTHON: &[&str] = &["python-pmi@fastpmi", "python-mpi4py@mpiexec"];

/// The configurations whose medians a target compares (they get
/// `--target-reps`, as does the whole start-up table).
const TARGET_COMPARED: &[&str] = &[
    "fastpmi-shm",
    "fastpmi-shm-yields0",
    "futex-floor",
    "death-detect@fastpmi-shm",
];

/// Every configuration the report lists, family by family.
fn all_names() -> impl Iterator<Item = &'static &'static str> {
    EXCHANGE
        .iter()
        .chain(STARTUP)
        .chain(SPAWN)
        .chain(LAUNCH)
        .chain(GROUP)
        .chain(PS)
        .chain(DEATH)
        .chain(ULFM)
}

/// The configuration whose runs count only the `ps` answers that show the
/// job sitting in fence 1: it needs nothing but fastpmi, so it must run.
const PS_SITTING: &str = "fence-sitting+ps@fastpmi-shm";
/// raw.csv columns of the ps family's figures.
const PS_COLUMNS: &[&str] = &[
    "ps_count",
    "ps_failed",
    "ps_other",
    "ps_median_ms",
    "ps_max_ms",
];
const SIZES: &[u32] = &[2, 4];

/// Split one CSV record (quotes with doubled inner quotes; no newlines in
/// fields: the harness writes one record per line).
fn csv_fields(line: &str) -> Vec<String> {
    // Every quote is one of a pair: an opening and closing one, or a
    // doubled one inside a quoted field.
    let quoted = line.matches('"').count() % 2 == 1;
    assert!(!quoted, "unterminated quote in CSV line: {line}");
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line.as_bytes());
    let mut records = reader.records();
    let record = records
        .next()
        .unwrap_or_else(|| panic!("no CSV record in line: {line}"))
        .unwrap_or_else(|e| panic!("bad CSV line ({e}): {line}"));
    assert!(records.next().is_none(), "two CSV records in line: {line}");
    record.iter().map(str::to_string).collect()
}

/// Cells of the markdown table row whose first cells are `prefix`.
fn row<'a>(md: &'a str, prefix: &[&str]) -> Option<Vec<&'a str>> {
    md.lines().find_map(|l| {
        let cells: Vec<&str> = l
            .trim()
            .strip_prefix('|')?
            .strip_suffix('|')?
            .split(" | ")
            .map(str::trim)
            .collect();
        (cells.len() > prefix.len() && cells.iter().zip(prefix).all(|(a, b)| a == b))
            .then_some(cells)
    })
}

fn assert_status_cell(cell: &str, what: &str) {
    if let Some(reason) = cell.strip_prefix("missing:") {
        assert!(
            !reason.trim().is_empty(),
            "{what}: missing without a reason"
        );
    } else {
        assert!(
            cell == "present" || cell.contains(" ok"),
            "{what}: status cell `{cell}` is neither present/ok nor missing with a reason"
        );
    }
}

/// Text contents of the SVG's <text> elements.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

#[test]
fn quick_run_writes_a_well_formed_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let run = Command::new(env!("CARGO_BIN_EXE_fastpmi-bench"))
        .args([
            "--sizes",
            "2,4",
            "--reps",
            "1",
            "--target-reps",
            "2",
            "--quick",
        ])
        // Keep the MPICH startup table to a toy size too.
        .args(["--startup-sizes", "4", "--spawn-sizes", "1"])
        .args([
            "--launch-sizes",
            "2",
            "--group-sizes",
            "4",
            "--ps-sizes",
            "4",
            "--death-sizes",
            "4",
            "--ulfm-sizes",
            "4",
            "--python-sizes",
            "none",
            // The nested rows start a private Slurm: not in a quick run.
            "--nest-sizes",
            "none",
        ])
        .arg("--out")
        .arg(&out)
        // Under cargo the harness rebuilds the launcher first (for `cargo
        // run`); cargo test has just built it, so skip that here.
        .env_remove("CARGO")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "fastpmi-bench failed:\n{stderr}");
    // A progress line per case.
    assert!(stderr.contains("[1/"), "no progress lines:\n{stderr}");

    let read = |name: &str| {
        std::fs::read_to_string(out.join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", Path::new(name).display()))
    };
    let (md, csv, svg) = (read("bench.md"), read("raw.csv"), read("bench.svg"));

    // bench.md: every configuration listed, present or missing with a reason;
    // a row per (N, configuration) in the exchange and startup tables.
    for name in all_names() {
        let cells =
            row(&md, &[name]).unwrap_or_else(|| panic!("no configuration row for {name}:\n{md}"));
        assert_status_cell(cells[1], name);
    }
    for name in SPAWN {
        let cells =
            row(&md, &["1", name]).unwrap_or_else(|| panic!("no spawn row for {name}:\n{md}"));
        assert_status_cell(cells[2], name);
    }
    let ps = md
        .split("## fastpmi ps during a job")
        .nth(1)
        .expect("no ps section");
    for name in PS {
        let cells = row(ps, &["4", name]).unwrap_or_else(|| panic!("no ps row for {name}:\n{ps}"));
        assert_eq!(cells.len(), 7, "ps row {name}: {cells:?}");
        assert_status_cell(cells[2], name);
    }
    // The sitting run succeeded, so the harness recognised at least one real
    // `fastpmi ps --json` answer as "fence 1: 3/4 arrived, missing: rank 3"
    // (a run without one fails), and the row shows the counted answers.
    let cells = row(ps, &["4", PS_SITTING]).unwrap();
    assert_eq!(cells[2], "1/1 ok", "sitting run did not succeed:\n{md}");
    assert!(
        cells[4].parse::<f64>().is_ok_and(|k| k >= 1.0),
        "sitting row's answers cell `{}`",
        cells[4]
    );
    let group = md.split("## Group fence").nth(1).expect("no group section");
    let cells = row(group, &["4"]).unwrap_or_else(|| panic!("no group row for N=4:\n{group}"));
    assert_eq!(cells.len(), 6, "group row: {cells:?}");
    assert_status_cell(cells[1], GROUP[0]);
    // Death detection needs nothing but fastpmi: its run must succeed.
    let death = md
        .split("## Death detection")
        .nth(1)
        .expect("no death-detection section");
    let cells = row(death, &["4"]).unwrap_or_else(|| panic!("no death row for N=4:\n{death}"));
    assert_eq!(cells.len(), 5, "death row: {cells:?}");
    assert_eq!(
        cells[1], "2/2 ok",
        "death-detection runs did not succeed:\n{md}"
    );
    for c in &cells[2..] {
        assert!(
            c.split_whitespace()
                .next()
                .is_some_and(|v| v.parse::<f64>().is_ok_and(|x| x >= 0.0)),
            "death cell `{c}`"
        );
    }
    let ulfm = md
        .split("## ULFM")
        .nth(1)
        .expect("no ULFM section")
        .split("\n## ")
        .next()
        .unwrap();
    for name in ULFM {
        let cells =
            row(ulfm, &["4", name]).unwrap_or_else(|| panic!("no ULFM row for {name}:\n{ulfm}"));
        assert_eq!(cells.len(), 5, "ULFM row {name}: {cells:?}");
        assert_status_cell(cells[2], name);
    }
    let python = md
        .split("## Python")
        .nth(1)
        .expect("no Python section")
        .split("\n## ")
        .next()
        .unwrap();
    assert!(
        python.contains("Not run (`--python-sizes none`)."),
        "{python}"
    );
    for name in PYTHON {
        let cells = row(&md, &[name]).unwrap_or_else(|| panic!("no configuration row for {name}"));
        assert_eq!(cells[1], "not run (--python-sizes none)", "{name}");
    }
    for name in LAUNCH {
        let cells =
            row(&md, &["2", name]).unwrap_or_else(|| panic!("no start-up row for {name}:\n{md}"));
        assert_eq!(cells.len(), 5, "start-up row {name}: {cells:?}");
        assert_status_cell(cells[2], name);
    }
    for n in SIZES {
        for name in EXCHANGE {
            let cells = row(&md, &[&n.to_string(), name])
                .unwrap_or_else(|| panic!("no exchange row for N={n} {name}:\n{md}"));
            assert_eq!(cells.len(), 12, "exchange row N={n} {name}: {cells:?}");
            assert_status_cell(cells[2], name);
        }
    }
    for name in STARTUP {
        let cells =
            row(&md, &["4", name]).unwrap_or_else(|| panic!("no startup row for {name}:\n{md}"));
        assert_status_cell(cells[2], name);
    }
    for section in [
        "## Targets",
        "## PMI exchange",
        "## MPI startup",
        "## Spawn latency",
        "## Job start-up",
        "## Group fence",
        "## fastpmi ps during a job",
        "## Death detection",
        "## ULFM",
        "## Python",
        "## Beyond one node: node servers under Slurm",
        "## Memory",
        "## Failures",
    ] {
        assert!(md.contains(section), "bench.md lacks {section}");
    }
    assert!(
        md.contains("- machine: ") && md.contains("- command: `"),
        "no machine/command lines"
    );
    let targets = md
        .split("## Targets")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let verdicts = targets.lines().filter(|l| l.starts_with("- ")).count();
    // Seven exchange targets, three start-up targets per start-up N, one
    // group-fence target per group N, two `ps` targets per ps N, one
    // death-detection target, one ULFM target.
    assert_eq!(
        verdicts,
        7 + 3 + 1 + 2 + 1 + 1,
        "one line per target:\n{targets}"
    );
    for l in targets.lines().filter(|l| l.starts_with("- ")) {
        assert!(
            l.contains(": met") || l.contains(": missed"),
            "no verdict: {l}"
        );
    }

    // raw.csv: a header and one well-formed row per run.
    let mut lines = csv.lines();
    let header = csv_fields(lines.next().expect("raw.csv is empty"));
    for col in [
        "config",
        "n",
        "rep",
        "status",
        "wall_s",
        "fence_us",
        "getall_us",
        "error",
    ]
    .iter()
    .chain(PS_COLUMNS)
    .chain(DEATH_COLUMNS)
    .chain(ULFM_COLUMNS)
    .copied()
    {
        assert!(
            header.iter().any(|h| h == col),
            "raw.csv lacks column {col}"
        );
    }
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut ok_configs = BTreeSet::new();
    let mut rows_per_config: BTreeMap<String, usize> = BTreeMap::new();
    let mut ps_sitting_rows = 0;
    for line in lines {
        let f = csv_fields(line);
        assert_eq!(f.len(), header.len(), "ragged raw.csv row: {line}");
        let config = &f[col("config")];
        assert!(
            EXCHANGE.contains(&config.as_str())
                || STARTUP.contains(&config.as_str())
                || SPAWN.contains(&config.as_str())
                || LAUNCH.contains(&config.as_str())
                || GROUP.contains(&config.as_str())
                || PS.contains(&config.as_str())
                || DEATH.contains(&config.as_str())
                || ULFM.contains(&config.as_str()),
            "unknown config {config}"
        );
        *rows_per_config.entry(config.clone()).or_default() += 1;
        let status = f[col("status")].as_str();
        assert!(
            ["ok", "failed", "timeout", "wrong-transport", "skipped"].contains(&status),
            "bad status {status}"
        );
        if status == "ok" {
            ok_configs.insert(config.clone());
        } else {
            assert!(
                !f[col("error")].is_empty(),
                "a {status} run without a reason: {line}"
            );
        }
        // The ps family's figures: filled for the polled configurations'
        // ok runs (ps_other for the sitting one only), empty for every other.
        let polled = [PS[1], PS_SITTING].contains(&config.as_str());
        for ps_col in PS_COLUMNS {
            let v = &f[col(ps_col)];
            let want = status == "ok" && polled && (*ps_col != "ps_other" || config == PS_SITTING);
            if want {
                assert!(
                    v.parse::<f64>().is_ok(),
                    "{config}: {ps_col}=`{v}` is not a number: {line}"
                );
            } else if !polled || (*ps_col == "ps_other" && config != PS_SITTING) {
                assert!(v.is_empty(), "{config}: {ps_col}=`{v}` should be empty");
            }
        }
        // The death figures: filled for the death runs that succeeded,
        // empty for every other.
        for d in DEATH_COLUMNS {
            let v = &f[col(d)];
            if status == "ok" && DEATH.contains(&config.as_str()) {
                assert!(v.parse::<f64>().is_ok(), "{config}: {d}=`{v}`: {line}");
            } else {
                assert!(v.is_empty(), "{config}: {d}=`{v}` should be empty");
            }
        }
        // The survivors' count: all 3 for an ok ULFM run, a count for the
        // others that ran, nothing for every other configuration.
        for u in ULFM_COLUMNS {
            let v = &f[col(u)];
            if status == "ok" && ULFM.contains(&config.as_str()) {
                assert_eq!(v, "3", "{config}: {u}: {line}");
            } else if !ULFM.contains(&config.as_str()) {
                assert!(v.is_empty(), "{config}: {u}=`{v}` should be empty");
            }
        }
        if status == "ok" && config == PS_SITTING {
            ps_sitting_rows += 1;
            let get = |c: &str| f[col(c)].parse::<f64>().unwrap();
            assert!(get("ps_count") >= 1.0, "{line}");
            assert!(get("ps_median_ms") <= get("ps_max_ms"), "{line}");
        }
        for (h, v) in header.iter().zip(&f) {
            let numeric = h == "n"
                || h == "rep"
                || h.ends_with("_us")
                || h.ends_with("_kb")
                || h == "wall_s"
                || PS_COLUMNS.contains(&h.as_str())
                || DEATH_COLUMNS.contains(&h.as_str())
                || ULFM_COLUMNS.contains(&h.as_str());
            if numeric && !v.is_empty() {
                assert!(v.parse::<f64>().is_ok(), "{h}={v} is not a number");
            }
        }
    }
    // The sitting run succeeded (asserted on bench.md above): its figures
    // are in raw.csv.
    assert_eq!(ps_sitting_rows, 1, "ok {PS_SITTING} rows in raw.csv");
    // Every present configuration ran once per N (reps = 1), those the
    // targets compare twice (target-reps = 2), start-ups of at most 64
    // ranks four times that (the launch size here is 2).
    for name in all_names() {
        let cells = row(&md, &[name]).unwrap();
        let reps = if LAUNCH.contains(name) {
            2 * 4
        } else if TARGET_COMPARED.contains(name) {
            2
        } else {
            1
        };
        let expected = if cells[1] == "present" {
            if !EXCHANGE.contains(name) {
                reps
            } else {
                reps * SIZES.len()
            }
        } else {
            0
        };
        assert_eq!(
            rows_per_config.get(*name).copied().unwrap_or(0),
            expected,
            "raw.csv rows of {name}"
        );
    }

    // bench.svg: an SVG whose legend names exactly the configurations with
    // at least one ok run (one series each; the exchange and start-up
    // configurations are plotted, MPI startup and spawn runs are not).
    let t = svg.trim();
    assert!(
        t.starts_with("<svg") && t.ends_with("</svg>"),
        "not an SVG document"
    );
    assert!(t.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    let texts = svg_texts(&svg);
    for name in EXCHANGE.iter().chain(LAUNCH) {
        let shown = texts.iter().filter(|x| x == name).count();
        let want = usize::from(ok_configs.contains(*name));
        assert_eq!(
            shown, want,
            "legend entries for {name} (ok runs: {ok_configs:?})"
        );
    }
    let polylines = svg.matches("<polyline").count();
    let plotted = EXCHANGE
        .iter()
        .chain(LAUNCH)
        .filter(|n| ok_configs.contains(**n))
        .count();
    assert!(
        polylines >= plotted,
        "{polylines} polylines for {plotted} plotted configurations"
    );
}
