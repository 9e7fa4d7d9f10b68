//! `PMI_process_mapping`: `(vector,(X,Y,Z)[,(X,Y,Z)...])`, "starting at
//! node X, Y nodes with Z ranks each", ranks assigned in order. When the
//! blocks describe fewer ranks than the job has, the description starts
//! over (Hydra's `(vector,(0,1,1))` for N ranks on one node without `-ppn`
//! means one rank per node, wrapping).
//!
//! Used for the local ranks (PMI-1 clique, `PMI2_Info_GetSize`) when the
//! server offers no `localRanks` node attribute.

/// The `(X, Y, Z)` blocks, or `None` if `s` is not a process mapping.
pub fn parse(s: &str) -> Option<Vec<(u32, u32, u32)>> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let body = s.strip_prefix("(vector,")?.strip_suffix(')')?;
    let mut blocks = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let inner = rest.strip_prefix('(')?;
        let close = inner.find(')')?;
        let nums: Vec<u32> = inner[..close]
            .split(',')
            .map(|n| n.parse().ok())
            .collect::<Option<_>>()?;
        let [x, y, z] = nums[..] else { return None };
        blocks.push((x, y, z));
        rest = &inner[close + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    if blocks.is_empty() {
        None
    } else {
        Some(blocks)
    }
}

/// The node index of each of `size` ranks under `blocks`.
pub fn nodes_of(blocks: &[(u32, u32, u32)], size: u32) -> Option<Vec<u64>> {
    if blocks.iter().all(|&(_, y, z)| y == 0 || z == 0) {
        return None;
    }
    let mut node = Vec::with_capacity(size as usize);
    'fill: loop {
        for &(x, y, z) in blocks {
            for n in 0..y {
                for _ in 0..z {
                    if node.len() == size as usize {
                        break 'fill;
                    }
                    node.push(u64::from(x) + u64::from(n));
                }
            }
        }
        if node.len() == size as usize {
            break;
        }
    }
    Some(node)
}

/// The ranks on the same node as `rank` (in increasing order), or `None`
/// if `mapping` is not a process mapping or does not place `rank`.
pub fn local_ranks(mapping: &str, rank: u32, size: u32) -> Option<Vec<u32>> {
    let nodes = nodes_of(&parse(mapping)?, size)?;
    let mine = *nodes.get(rank as usize)?;
    Some((0..size).filter(|&r| nodes[r as usize] == mine).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_node() {
        assert_eq!(parse("(vector,(0,1,4))"), Some(vec![(0, 1, 4)]));
        assert_eq!(
            local_ranks("(vector,(0,1,4))", 2, 4),
            Some(vec![0, 1, 2, 3])
        );
    }

    #[test]
    fn several_blocks() {
        // node 0: 0,1; node 1: 2,3; node 2: 4
        let m = "(vector,(0,2,2),(2,1,1))";
        assert_eq!(local_ranks(m, 3, 5), Some(vec![2, 3]));
        assert_eq!(local_ranks(m, 4, 5), Some(vec![4]));
    }

    #[test]
    fn wraps_around() {
        // Hydra without -ppn: one rank per node, wrapping over one node.
        assert_eq!(local_ranks("(vector,(0,1,1))", 1, 3), Some(vec![0, 1, 2]));
        // Two nodes of one rank each, four ranks: 0,2 on node 0; 1,3 on 1.
        assert_eq!(local_ranks("(vector,(0,2,1))", 3, 4), Some(vec![1, 3]));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "(vector,)",
            "(vector,(0,1))",
            "vector,(0,1,2)",
            "(vector,(0,0,0))",
            "(vector,(a,1,1))",
        ] {
            assert_eq!(local_ranks(bad, 0, 2), None, "{bad}");
        }
    }
}
