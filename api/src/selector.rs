//! A pod's labels as the operator keeps them, and a LogPolicy's compiled selector.
//!
//! The operator holds every opted-in pod's labels for as long as the pod lives: at
//! 50,000 pods, a `BTreeMap<String, String>` per pod (a B-tree leaf of eleven slots and
//! two heap strings per label) was about 0.7 KiB a pod. [`Labels`] keeps the same labels
//! in two allocations, sorted by key, and [`PodSelector`] matches them exactly as
//! Kubernetes' label selectors do (a test compares it with `kube`'s [`Selector`]).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use kube::core::{Expression, Selector};

/// A pod's labels: sorted by key, the keys and values in one string.
///
/// ```
/// use logpolicy_api::selector::Labels;
///
/// let labels: Labels = [("tier", "web"), ("app", "shop")].into_iter().collect();
/// assert_eq!(labels.get("app"), Some("shop"));
/// assert_eq!(labels.get("zone"), None);
/// assert_eq!(labels.iter().collect::<Vec<_>>(), [("app", "shop"), ("tier", "web")]);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Every key followed by its value, in key order.
    text: Box<str>,
    /// Per label, where its key ends and where its value ends in `text`.
    ends: Box<[(u32, u32)]>,
}

impl Labels {
    /// The value of `key`, if the pod has that label.
    pub fn get(&self, key: &str) -> Option<&str> {
        let (mut lo, mut hi) = (0, self.ends.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (start, k, v) = self.bounds(mid);
            match self.text[start..k].cmp(key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(&self.text[k..v]),
            }
        }
        None
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The labels, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        (0..self.ends.len()).map(|i| {
            let (start, k, v) = self.bounds(i);
            (&self.text[start..k], &self.text[k..v])
        })
    }

    /// Where the `i`th label's key starts, where it ends (its value starts), and where
    /// its value ends.
    fn bounds(&self, i: usize) -> (usize, usize, usize) {
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1].1 as usize,
        };
        let (k, v) = self.ends[i];
        (start, k as usize, v as usize)
    }

    /// These labels with one more (or one changed).
    #[must_use]
    pub fn with(&self, key: &str, value: &str) -> Self {
        let mut map: BTreeMap<&str, &str> = self.iter().collect();
        map.insert(key, value);
        map.into_iter().collect()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    /// Sorts by key; of two labels with one key, the last wins (as in a map).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut pairs: Vec<(K, V)> = iter.into_iter().collect();
        pairs.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        // Keep the last of equal keys: reverse, dedup keeping the first, reverse.
        pairs.reverse();
        pairs.dedup_by(|a, b| a.0.as_ref() == b.0.as_ref());
        pairs.reverse();
        let len = pairs
            .iter()
            .map(|(k, v)| k.as_ref().len() + v.as_ref().len())
            .sum();
        let mut text = String::with_capacity(len);
        let mut ends = Vec::with_capacity(pairs.len());
        for (k, v) in &pairs {
            text.push_str(k.as_ref());
            let k_end = text.len();
            text.push_str(v.as_ref());
            // Labels are bounded by the API server (keys 317 bytes, values 63; the
            // object 1.5 MiB): never near 4 GiB.
            ends.push((offset(k_end), offset(text.len())));
        }
        Labels {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }
}

fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl From<&BTreeMap<String, String>> for Labels {
    fn from(map: &BTreeMap<String, String>) -> Self {
        map.iter().collect()
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A LogPolicy's `spec.selector`, validated: every expression must hold.
///
/// ```
/// use logpolicy_api::selector::{Labels, PodSelector};
/// use kube::core::Expression;
///
/// let selector = PodSelector::new(vec![
///     Expression::Equal("app".into(), "shop".into()),
///     Expression::DoesNotExist("canary".into()),
/// ]);
/// let labels: Labels = [("app", "shop")].into_iter().collect();
/// assert!(selector.matches(&labels));
/// assert!(!selector.matches(&labels.with("canary", "true")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSelector(Vec<Expression>);

impl PodSelector {
    /// A selector requiring all of `expressions` (none selects every pod).
    pub fn new(expressions: Vec<Expression>) -> Self {
        PodSelector(expressions)
    }

    /// Whether a pod with these labels is selected: each expression holds, with the
    /// meaning Kubernetes gives it (`NotIn` and `!=` also hold when the key is absent).
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|e| match e {
            Expression::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Expression::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            Expression::Equal(k, value) => labels.get(k) == Some(value.as_str()),
            Expression::NotEqual(k, value) => labels.get(k) != Some(value.as_str()),
            Expression::Exists(k) => labels.get(k).is_some(),
            Expression::DoesNotExist(k) => labels.get(k).is_none(),
        })
    }
}

impl From<&PodSelector> for Selector {
    fn from(s: &PodSelector) -> Self {
        s.0.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::SelectorExt;
    use proptest::prelude::*;

    #[test]
    fn labels_keep_every_label_sorted_and_the_last_of_a_key() {
        let labels: Labels = [("b", "2"), ("a", "1"), ("c", ""), ("a", "3")]
            .into_iter()
            .collect();
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            [("a", "3"), ("b", "2"), ("c", "")]
        );
        assert_eq!(labels.len(), 3);
        assert_eq!(labels.get("a"), Some("3"));
        assert_eq!(labels.get("c"), Some(""), "an empty value is a value");
        assert_eq!(labels.get(""), None);
        assert_eq!(labels.get("ab"), None, "a key is not a prefix");
        assert!(Labels::default().is_empty());
        assert_eq!(Labels::default().get("a"), None);
        assert_eq!(format!("{labels:?}"), r#"{"a": "3", "b": "2", "c": ""}"#);
        assert_eq!(labels.with("b", "9").get("b"), Some("9"));
        assert_eq!(labels.with("0", "x").iter().next(), Some(("0", "x")));
    }

    fn key() -> impl Strategy<Value = String> {
        // Few keys, so that selectors and labels meet; one is a prefix of another.
        prop::sample::select(vec!["app", "ap", "tier", "zone", "logpolicy.dev/enabled"])
            .prop_map(str::to_owned)
    }

    fn value() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", "a", "b", "web", "true"]).prop_map(str::to_owned)
    }

    fn expression() -> impl Strategy<Value = Expression> {
        let values = || prop::collection::btree_set(value(), 1..4);
        prop_oneof![
            (key(), values()).prop_map(|(k, v)| Expression::In(k, v)),
            (key(), values()).prop_map(|(k, v)| Expression::NotIn(k, v)),
            (key(), value()).prop_map(|(k, v)| Expression::Equal(k, v)),
            (key(), value()).prop_map(|(k, v)| Expression::NotEqual(k, v)),
            key().prop_map(Expression::Exists),
            key().prop_map(Expression::DoesNotExist),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// The same answer as `kube`'s own `Selector::matches` over a `BTreeMap`, and
        /// the same labels back.
        #[test]
        fn matches_like_kubes_selector(
            map in prop::collection::btree_map(key(), value(), 0..5),
            exprs in prop::collection::vec(expression(), 0..4),
        ) {
            let labels = Labels::from(&map);
            let ours = PodSelector::new(exprs.clone());
            let kube: Selector = exprs.into_iter().collect();
            prop_assert_eq!(ours.matches(&labels), kube.matches(&map));
            prop_assert_eq!(Selector::from(&ours), kube);
            let back: BTreeMap<String, String> =
                labels.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
            prop_assert_eq!(back, map.clone());
            for k in map.keys() {
                prop_assert_eq!(labels.get(k), map.get(k).map(String::as_str));
            }
        }
    }
}
