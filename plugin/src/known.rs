//! Whether a target names something the selected pods have: a `raise` of a target no
//! callsite has changes nothing, so it is refused with the closest names the pods know.
//!
//! A target is known when some callsite's target is it or under it at a `::` boundary
//! (`shop` covers `shop::payment`, as the policy applies it). A callsite is known once it
//! has run at a level within the most verbose level its process enables (see
//! `logpolicy::ledger`): a target whose code has not run yet is unknown, hence
//! `raise --allow-unknown-target`.

use logpolicy::Target;

/// How many close names a refusal offers.
pub const CLOSE_NAMES: usize = 3;

/// Whether `requested` governs any of `known` (equal, or a parent at `::`).
///
/// ```
/// use kubectl_logpolicy::known::covers;
/// let known = ["shop::payment", "shop::db::pool"];
/// assert!(covers("shop", &known));
/// assert!(covers("shop::db", &known));
/// assert!(!covers("shop::payments", &known));
/// assert!(!covers("sho", &known));
/// ```
pub fn covers<S: AsRef<str>>(requested: &str, known: &[S]) -> bool {
    let Ok(prefix) = Target::new(requested) else {
        return false;
    };
    known.iter().any(|k| prefix.matches(k.as_ref()))
}

/// Up to [`CLOSE_NAMES`] of the known targets (and their parents: `shop::db` for
/// `shop::db::pool`) closest to `requested` by edit distance (a transposition counts
/// one), closest first; only names within a third of the longer's length (at least 2
/// edits) are offered.
///
/// ```
/// use kubectl_logpolicy::known::close_names;
/// let known = ["shop::payment", "shop::db::pool", "http::access"];
/// assert_eq!(close_names("shop::payments", &known), ["shop::payment"]);
/// assert_eq!(close_names("shop::dbb", &known), ["shop::db"]);
/// assert!(close_names("kube", &known).is_empty());
/// ```
pub fn close_names<S: AsRef<str>>(requested: &str, known: &[S]) -> Vec<String> {
    let mut names: Vec<&str> = Vec::new();
    for k in known {
        let k = k.as_ref();
        names.push(k);
        let mut at = 0;
        while let Some(i) = k[at..].find("::") {
            names.push(&k[..at + i]);
            at += i + 2;
        }
    }
    names.sort_unstable();
    names.dedup();
    let mut scored: Vec<(usize, &str)> = names
        .into_iter()
        .filter(|n| *n != requested)
        .filter_map(|n| {
            let d = distance(requested, n);
            let limit = (requested.len().max(n.len()) / 3).max(2);
            (d <= limit).then_some((d, n))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(CLOSE_NAMES)
        .map(|(_, n)| n.to_owned())
        .collect()
}

/// The optimal string alignment distance between `a` and `b` (insertions, deletions,
/// substitutions and transpositions of adjacent characters, each one edit).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("abc", "acb"), 1);
        assert_eq!(distance("shop::payments", "shop::payment"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn the_closest_first_at_most_three() {
        let known = ["ab::c", "ab::d", "ab::e", "ab::f"];
        let names = close_names("ab::x", &known);
        assert_eq!(names.len(), CLOSE_NAMES);
        assert!(names.iter().all(|n| n.starts_with("ab::")), "{names:?}");
        // An invalid target covers nothing.
        assert!(!covers("a b", &known));
    }
}
