//! `suggest`: from measured rates, the sampling that cuts the selected pods' bytes by at
//! least a share, touching nothing at or above `warn`.
//!
//! The plan is pure: [`plan`] takes each target's measured bytes per second (split into
//! what is below `warn`, which sampling may cut, and the rest, which it never touches:
//! the policy model keeps every warning and error whatever a sampling rule says) and
//! returns a `keepOneIn` per target, or the largest cut that can be reached.
//!
//! How it chooses, so that the result is easy to explain and never harsher than needed:
//! - the biggest targets (by bytes below `warn`) first: the fewest targets that can make
//!   the cut with one common `keepOneIn` no larger than [`MAX_KEEP_ONE_IN`];
//! - that smallest common `keepOneIn` (a target sampled one in N writes 1/N of what it
//!   wrote unsampled);
//! - then each chosen target, smallest first, is given the smallest `keepOneIn` that
//!   still makes the cut with the others as they are;
//! - a target that is already sampled is measured after its sampling: its unsampled rate
//!   is its written rate times (written + sampled) / written, and the new rule replaces
//!   the old one (a higher-priority layer), so the plan never asks for a gentler rule than
//!   the one in force (that would raise it, not cut it).
//!
//! A rule set on a target also governs its child targets (`shop` governs `shop::db`)
//! unless a rule names them: the plan names every target it samples, and a chosen
//! target's projection counts only its own events.

use serde::Serialize;

/// The largest `keepOneIn` the plan proposes: sampling harder than one in 1,000 keeps so
/// little that the target had better be raised to `warn` by hand.
pub const MAX_KEEP_ONE_IN: u32 = 1000;

/// What one target writes now, per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetRate {
    /// The target.
    pub target: String,
    /// Bytes per second of its events below `warn` (what sampling may cut).
    pub below_warn: f64,
    /// Bytes per second of its warnings and errors (never cut).
    pub warn_and_above: f64,
    /// The share of its events below `warn` that its current sampling keeps (1.0: not
    /// sampled), from the counts: written / (written + sampled).
    pub kept_share: f64,
}

impl TargetRate {
    /// Its bytes per second now.
    pub fn total(&self) -> f64 {
        self.below_warn + self.warn_and_above
    }

    /// What it would write below `warn` unsampled.
    fn unsampled(&self) -> f64 {
        if self.kept_share > 0.0 {
            self.below_warn / self.kept_share
        } else {
            self.below_warn
        }
    }

    /// The `keepOneIn` of its sampling now (1: none), rounded.
    fn current_keep(&self) -> u32 {
        if self.kept_share > 0.0 && self.kept_share < 1.0 {
            (1.0 / self.kept_share)
                .round()
                .clamp(1.0, f64::from(u32::MAX)) as u32
        } else {
            1
        }
    }

    /// Its bytes per second with its events below `warn` kept one in `n`.
    fn projected(&self, n: u32) -> f64 {
        self.unsampled() / f64::from(n) + self.warn_and_above
    }
}

/// One line of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// The target.
    pub target: String,
    /// Bytes per second now.
    pub now: f64,
    /// Keep one event below `warn` in this many.
    pub keep_one_in: u32,
    /// Bytes per second projected.
    pub projected: f64,
}

/// A plan that makes the cut.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The targets to sample, biggest first.
    pub samples: Vec<Sample>,
    /// Bytes per second of the selection now.
    pub now: f64,
    /// Bytes per second projected.
    pub projected: f64,
}

impl Plan {
    /// The share of the bytes it cuts, 0 to 1.
    pub fn cut(&self) -> f64 {
        if self.now > 0.0 {
            1.0 - self.projected / self.now
        } else {
            0.0
        }
    }
}

/// Why no plan makes the cut.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanError {
    /// Nothing was written in the window.
    NothingWritten,
    /// The cut needs more than sampling below `warn` can give.
    OutOfReach {
        /// The cut asked for, in percent.
        wanted: f64,
        /// The largest cut that can be reached, in percent.
        largest: f64,
    },
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::NothingWritten => {
                f.write_str("the selected pods wrote nothing in the window: nothing to cut")
            }
            PlanError::OutOfReach { wanted, largest } => write!(
                f,
                "a {wanted:.0}% cut cannot be reached without touching warnings and errors: the most sampling can cut is {largest:.1}% (every target's events below warn kept one in {MAX_KEEP_ONE_IN})"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// The sampling that cuts the bytes of `rates` by at least `cut` (0 to 1).
///
/// ```
/// use kubectl_logpolicy::suggest::{plan, TargetRate};
/// let t = |target: &str, below: f64, above: f64| TargetRate {
///     target: target.into(), below_warn: below, warn_and_above: above, kept_share: 1.0,
/// };
/// // shop::http writes 80% of the bytes: one in 3 of it cuts 53%.
/// let p = plan(&[t("shop::http", 800.0, 0.0), t("shop::db", 150.0, 50.0)], 0.5).unwrap();
/// assert_eq!(p.samples.len(), 1);
/// assert_eq!((p.samples[0].target.as_str(), p.samples[0].keep_one_in), ("shop::http", 3));
/// assert!(p.cut() >= 0.5);
/// ```
pub fn plan(rates: &[TargetRate], cut: f64) -> Result<Plan, PlanError> {
    let now: f64 = rates.iter().map(TargetRate::total).sum();
    if now <= 0.0 {
        return Err(PlanError::NothingWritten);
    }
    let goal = now * (1.0 - cut.clamp(0.0, 1.0));
    // Candidates: what they write below warn, biggest first.
    let mut order: Vec<&TargetRate> = rates.iter().filter(|r| r.below_warn > 0.0).collect();
    order.sort_by(|a, b| {
        b.below_warn
            .total_cmp(&a.below_warn)
            .then_with(|| a.target.cmp(&b.target))
    });
    let projected = |keeps: &[u32]| -> f64 {
        let chosen: f64 = order
            .iter()
            .zip(keeps)
            .map(|(r, &n)| r.projected(n.max(r.current_keep())))
            .sum();
        let rest: f64 = order.iter().skip(keeps.len()).map(|r| r.total()).sum();
        let untouched: f64 = rates
            .iter()
            .filter(|r| r.below_warn <= 0.0)
            .map(TargetRate::total)
            .sum();
        chosen + rest + untouched
    };
    // The fewest biggest targets that can make it with one common keepOneIn.
    let mut keeps: Option<Vec<u32>> = None;
    for k in 1..=order.len() {
        let common = smallest_keep(|n| projected(&vec![n; k]) <= goal);
        if let Some(n) = common {
            keeps = Some(vec![n; k]);
            break;
        }
    }
    let Some(mut keeps) = keeps else {
        let largest = projected(&vec![MAX_KEEP_ONE_IN; order.len()]);
        return Err(PlanError::OutOfReach {
            wanted: cut * 100.0,
            largest: (1.0 - largest / now) * 100.0,
        });
    };
    // No harsher than needed: the smallest chosen target first.
    for i in (0..keeps.len()).rev() {
        let mut trial = keeps.clone();
        if let Some(n) = smallest_keep(|n| {
            trial[i] = n;
            projected(&trial) <= goal
        }) {
            keeps[i] = n.min(keeps[i]);
        }
    }
    let samples = order
        .iter()
        .zip(&keeps)
        .map(|(r, &n)| {
            let n = n.max(r.current_keep());
            Sample {
                target: r.target.clone(),
                now: r.total(),
                keep_one_in: n,
                projected: r.projected(n),
            }
        })
        .collect();
    Ok(Plan {
        samples,
        now,
        projected: projected(&keeps),
    })
}

/// The smallest `n` in 2..=[`MAX_KEEP_ONE_IN`] for which `ok(n)` holds, given that `ok`
/// only ever turns true as `n` grows (binary search).
fn smallest_keep(mut ok: impl FnMut(u32) -> bool) -> Option<u32> {
    if !ok(MAX_KEEP_ONE_IN) {
        return None;
    }
    let (mut lo, mut hi) = (2u32, MAX_KEEP_ONE_IN);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(target: &str, below: f64, above: f64) -> TargetRate {
        TargetRate {
            target: target.into(),
            below_warn: below,
            warn_and_above: above,
            kept_share: 1.0,
        }
    }

    #[test]
    fn the_biggest_targets_first_with_the_smallest_keep_that_makes_the_cut() {
        // 40% and 30% below warn: neither alone can cut 50%, so both, one in 4 (cut
        // 52.5%), then the smaller eased as far as the cut allows (one in 3: 50.0%).
        let rates = [t("a", 400.0, 0.0), t("b", 300.0, 0.0), t("c", 200.0, 100.0)];
        let p = plan(&rates, 0.5).unwrap();
        let keeps: Vec<(&str, u32)> = p
            .samples
            .iter()
            .map(|s| (s.target.as_str(), s.keep_one_in))
            .collect();
        assert_eq!(keeps, [("a", 4), ("b", 3)]);
        assert!(p.cut() >= 0.5, "{}", p.cut());
        // b at one in 2 would not make it: the plan is as gentle as it can be.
        let gentler = 400.0 / 4.0 + 300.0 / 2.0 + 300.0;
        assert!(gentler > 1000.0 * 0.5);
        assert!((p.projected - (100.0 + 100.0 + 300.0)).abs() < 1e-9);
    }

    #[test]
    fn warnings_and_errors_are_never_cut_and_an_unreachable_cut_says_the_largest() {
        let rates = [t("a", 100.0, 900.0)];
        let e = plan(&rates, 0.5).unwrap_err();
        let PlanError::OutOfReach { largest, .. } = e else {
            panic!("{e}")
        };
        assert!((largest - 9.99).abs() < 1e-9, "{largest}");
        assert!(
            e.to_string().contains("the most sampling can cut is 10.0%"),
            "{e}"
        );
        assert_eq!(
            plan(&[t("a", 0.0, 0.0)], 0.5),
            Err(PlanError::NothingWritten)
        );
    }

    #[test]
    fn a_target_sampled_already_is_planned_from_its_unsampled_rate_and_never_eased() {
        // Kept one in 10 now: it writes 100 B/s of 1,000 unsampled. A 50% cut of its
        // 100 B/s needs one in 20 of the 1,000.
        let sampled = TargetRate {
            target: "a".into(),
            below_warn: 100.0,
            warn_and_above: 0.0,
            kept_share: 0.1,
        };
        let p = plan(std::slice::from_ref(&sampled), 0.5).unwrap();
        assert_eq!(p.samples[0].keep_one_in, 20);
        assert!((p.projected - 50.0).abs() < 1e-9);
        // A tiny cut: never gentler than one in 10, the rule in force.
        let p = plan(&[sampled, t("b", 1000.0, 0.0)], 0.01).unwrap();
        assert_eq!(p.samples.len(), 1);
        assert_eq!(p.samples[0].target, "b");
    }
}
