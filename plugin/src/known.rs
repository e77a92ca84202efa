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

/// A target that no pod knows, with the closest names they do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The target as given.
    pub target: String,
    /// Up to [`CLOSE_NAMES`] known names close to it, closest first.
    pub close: Vec<String>,
}

/// Which of `requested` (in order, each once) no name of `known` is covered by, each with
/// its close names.
///
/// ```
/// use kubectl_logpolicy::known::unknown_targets;
/// let known = ["shop::payment", "shop::http"];
/// let unknown = unknown_targets(&["shop", "shop::payments"], &known);
/// assert_eq!(unknown.len(), 1);
/// assert_eq!(unknown[0].target, "shop::payments");
/// assert_eq!(unknown[0].close, ["shop::payment"]);
/// ```
pub fn unknown_targets<S: AsRef<str>>(requested: &[&str], known: &[S]) -> Vec<Unknown> {
    let mut out: Vec<Unknown> = Vec::new();
    for r in requested {
        if covers(r, known) || out.iter().any(|u| u.target == *r) {
            continue;
        }
        out.push(Unknown {
            target: (*r).to_owned(),
            close: close_names(r, known),
        });
    }
    out
}

/// What `raise` says when it refuses `unknown` targets, after reading `read` of
/// `selected` pods (`unreadable`: the pods that could not be read, with why).
pub fn refusal(unknown: &[Unknown], read: usize, selected: usize, unreadable: &[String]) -> String {
    let mut text = String::new();
    for u in unknown {
        text.push_str(&format!(
            "no selected pod knows the target `{}`: no callsite of it, or under it, has run on the {read} pods read",
            u.target
        ));
        match u.close.as_slice() {
            [] => text.push('\n'),
            [one] => text.push_str(&format!("; did you mean `{one}`?\n")),
            many => text.push_str(&format!(
                "; did you mean one of {}?\n",
                many.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    text.push_str(
        "Nothing was created. `kubectl logpolicy targets` lists the targets the pods know.\n",
    );
    if read < selected {
        text.push_str(&format!(
            "{} of the {selected} selected pods could not be read, and were not asked: {}\n",
            selected - read,
            unreadable.join("; ")
        ));
    }
    text.push_str(
        "A target is known once one of its callsites has run, at a level its service enables \
         (a debug-only target under an info baseline is not known until raised): if its code \
         has not run yet, add --allow-unknown-target.",
    );
    text
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

    #[test]
    fn the_refusal_names_the_close_names_the_pods_read_and_the_way_out() {
        let known = ["shop::payment", "shop::http"];
        let unknown = unknown_targets(&["shop::payments", "shop::payments", "kube"], &known);
        assert_eq!(unknown.len(), 2, "each unknown target once: {unknown:?}");
        let text = refusal(&unknown, 2, 3, &["shop-2 (connection refused)".to_owned()]);
        assert!(text.contains("`shop::payments`: no callsite of it, or under it, has run on the 2 pods read; did you mean `shop::payment`?"), "{text}");
        assert!(text.contains("`kube`: no callsite"), "{text}");
        assert!(text.contains("Nothing was created."), "{text}");
        assert!(
            text.contains("1 of the 3 selected pods could not be read"),
            "{text}"
        );
        assert!(text.contains("shop-2 (connection refused)"), "{text}");
        assert!(text.contains("--allow-unknown-target"), "{text}");
        assert!(unknown_targets(&["shop"], &known).is_empty());
    }
}
