//! Lists of ranks as ranges, `0-3,8`: Hydra's format of
//! `PMI_dead_processes` (MPICH's `MPIR_pmi_get_failed_procs` parses it),
//! and the rank and CPU lists of the launcher's reports.

/// `numbers` as ranges, ascending, each number once: `0-16,18-255`.
pub fn ranges(numbers: &[u32]) -> String {
    let mut v = numbers.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            out += &v[i].to_string();
        } else {
            out += &format!("{}-{}", v[i], v[j]);
        }
        i = j + 1;
    }
    out
}

/// The numbers of a list [`ranges`] wrote (blanks around items allowed),
/// ascending, each once; `None` for anything else, or for more than `max`
/// numbers (a hostile list cannot make the reader allocate more).
pub fn parse_ranges(list: &str, max: usize) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let n = item.parse::<u32>().ok()?;
                (n, n)
            }
        };
        if b < a || out.len() + (b - a) as usize >= max {
            return None;
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_ranges() {
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[3]), "3");
        let mut all: Vec<u32> = (0..256).filter(|&r| r != 17).collect();
        all.reverse();
        assert_eq!(ranges(&all), "0-16,18-255");
        assert_eq!(ranges(&[1, 2, 4, 6, 7, 8]), "1-2,4,6-8");
    }

    #[test]
    fn ranges_parse_back() {
        for v in [vec![], vec![3], vec![1, 2, 4, 6, 7, 8], (0..300).collect()] {
            assert_eq!(parse_ranges(&ranges(&v), 1024), Some(v));
        }
        assert_eq!(parse_ranges(" 5 , 1-2", 8), Some(vec![1, 2, 5]));
        assert_eq!(parse_ranges("3-1", 8), None);
        assert_eq!(parse_ranges("x", 8), None);
        assert_eq!(parse_ranges("0-4294967295", 1024), None);
        assert_eq!(parse_ranges("0-7", 8), Some((0..8).collect()));
        assert_eq!(parse_ranges("0-8", 8), None);
    }
}
