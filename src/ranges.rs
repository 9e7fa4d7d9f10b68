//! Lists of numbers as ranges, `0-3,8`: rank lists in the tools' reports,
//! CPU lists of rank bindings. Below both the tools and the launcher.

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

#[cfg(test)]
mod tests {
    use super::*;
    // Its name as the launcher's CPU-list formatter, before there was one.
    use super::ranges as cpu_list;

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
    fn cpu_lists() {
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_list(&[3]), "3");
    }
}
