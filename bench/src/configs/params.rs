//! The per-run knobs from the command line and Hydra's arguments, which
//! the core configurations, the start-up family and the placement rows
//! share.

use std::ffi::OsString;
use std::time::Duration;

/// Parent ranks of the spawn runs.
pub const SPAWN_PARENTS: u32 = 2;

/// Per-run knobs from the command line.
#[derive(Debug, Clone, Copy)]
pub struct RunParams {
    pub timeout: Duration,
    pub floor_iters: u32,
    /// Steady-state fences per Rust-client run (0: none), see [`crate::rank`].
    pub fence_loop: u32,
    pub hydra_ppn: u32,
}

/// Hydra's arguments for `n` ranks with at most `ppn` ranks per proxy.
///
/// Hydra 4.0.2 deadlocks past ~224 ranks behind one proxy (a full socket
/// buffer between proxy and ranks), so larger jobs get several proxies. One
/// proxy is started per distinct host name and repeated names are merged
/// (`localhost:4,localhost:4` is one proxy of 8), so each proxy gets its own
/// loopback address, and `-launcher fork` starts every proxy locally without
/// ssh. Returns the arguments and the number of proxies.
pub fn hydra_args(n: u32, ppn: u32, prog: OsString, args: Vec<OsString>) -> (Vec<OsString>, usize) {
    let ppn = ppn.max(1);
    let proxies = n.div_ceil(ppn).max(1);
    let (base, extra) = (n / proxies, n % proxies);
    let hosts: Vec<String> = (0..proxies)
        .map(|i| format!("127.0.0.{}:{}", i + 1, base + u32::from(i < extra)))
        .collect();
    let mut v: Vec<OsString> = ["-launcher", "fork", "-hosts"]
        .iter()
        .map(OsString::from)
        .collect();
    v.push(hosts.join(",").into());
    v.push("-n".into());
    v.push(n.to_string().into());
    v.push(prog);
    v.extend(args);
    (v, proxies as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hydra_hosts_split_evenly() {
        let (a, k) = hydra_args(256, 128, "p".into(), vec![]);
        assert_eq!(k, 2);
        assert_eq!(a[3], "127.0.0.1:128,127.0.0.2:128");
        let (a, k) = hydra_args(300, 128, "p".into(), vec![]);
        assert_eq!(k, 3);
        assert_eq!(a[3], "127.0.0.1:100,127.0.0.2:100,127.0.0.3:100");
        let (a, k) = hydra_args(2, 128, "p".into(), vec!["x".into()]);
        assert_eq!(k, 1);
        assert_eq!(a[3], "127.0.0.1:2");
        assert_eq!(a.last().unwrap(), "x");
    }
}
