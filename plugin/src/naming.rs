//! The names `raise` gives the LogPolicies it creates: what they do, readable in
//! `kubectl get lp` (`raise-shop-payment-debug-x7k2p`), unique by a random suffix, and a
//! valid object name (DNS-1123 label: at most 63 characters).

use logpolicy::policy::TargetSpec;
use logpolicy::Level;

/// The characters of the random suffix (as Kubernetes' `generateName` uses: no vowels,
/// so no words, and no look-alikes).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// The suffix's length.
pub const SUFFIX_LEN: usize = 5;
/// The longest object name.
const MAX_NAME: usize = 63;

/// A random suffix of [`SUFFIX_LEN`] characters.
pub fn random_suffix() -> Result<String, String> {
    let mut bytes = [0u8; SUFFIX_LEN];
    getrandom::fill(&mut bytes).map_err(|e| format!("no random numbers for a name: {e}"))?;
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect())
}

/// `raise-<subject>-<target words>-<level>-<suffix>`: the subject is the workload's name
/// (or the selector's first value), then the first target's path segments that do not
/// repeat the subject, then its level (else the default level). Every part is lowered to
/// `[a-z0-9-]`; the words are shortened to fit 63 characters with the suffix.
pub fn policy_name(
    subject: &str,
    targets: &[TargetSpec],
    default_level: Option<Level>,
    suffix: &str,
) -> String {
    let mut words = vec!["raise".to_owned()];
    words.extend(word(subject));
    if let Some(t) = targets.first() {
        for segment in t.target.split("::") {
            if let Some(w) = word(segment) {
                if words.last() != Some(&w) {
                    words.push(w);
                }
            }
        }
        words.push(t.level.as_str().to_owned());
    } else if let Some(l) = default_level {
        words.push(l.as_str().to_owned());
    }
    let budget = MAX_NAME - suffix.len() - 1;
    let mut head = words.join("-");
    if head.len() > budget {
        head.truncate(budget);
        while head.ends_with('-') {
            head.pop();
        }
    }
    format!("{head}-{suffix}")
}

/// `s` lowered to `[a-z0-9-]`, runs of anything else as one `-`, trimmed of `-`.
fn word(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let w = out.trim_matches('-');
    (!w.is_empty()).then(|| w.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::{parse_policy_name, parse_target};

    fn targets(specs: &[&str]) -> Vec<TargetSpec> {
        specs.iter().map(|s| parse_target(s).unwrap()).collect()
    }

    #[test]
    fn names_say_what_the_policy_does() {
        assert_eq!(
            policy_name("shop", &targets(&["shop::payment=debug"]), None, "x7k2p"),
            "raise-shop-payment-debug-x7k2p"
        );
        assert_eq!(
            policy_name(
                "checkout",
                &targets(&["shop::payment=trace", "x=debug"]),
                None,
                "bbbbb"
            ),
            "raise-checkout-shop-payment-trace-bbbbb"
        );
        assert_eq!(
            policy_name("shop", &[], Some(Level::Debug), "22222"),
            "raise-shop-debug-22222"
        );
        assert_eq!(
            policy_name("Shop_V2", &targets(&["Http.Access=info"]), None, "zzzzz"),
            "raise-shop-v2-http-access-info-zzzzz"
        );
    }

    #[test]
    fn names_are_valid_object_names_within_63_characters() {
        let long = "a".repeat(80);
        let name = policy_name(
            &long,
            &targets(&["very::long::target::path=debug"]),
            None,
            "x7k2p",
        );
        assert_eq!(name.len(), 63, "{name}");
        assert!(name.ends_with("-x7k2p"), "{name}");
        assert_eq!(parse_policy_name(&name), Ok(name.clone()));
        // A cut that ends on a dash does not leave two.
        let name = policy_name(&"b-".repeat(40), &[], None, "x7k2p");
        assert!(parse_policy_name(&name).is_ok(), "{name}");
        assert!(!name.contains("--"), "{name}");
    }

    #[test]
    fn suffixes_are_random_from_the_alphabet() {
        let a = random_suffix().unwrap();
        let b = random_suffix().unwrap();
        assert_eq!(a.len(), SUFFIX_LEN);
        assert!(a.bytes().all(|c| ALPHABET.contains(&c)), "{a}");
        let c = random_suffix().unwrap();
        // Three equal draws of 27^5 would be a broken generator.
        assert!(a != b || b != c, "{a} {b} {c}");
    }
}
