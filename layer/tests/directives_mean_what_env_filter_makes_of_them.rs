//! A `RUST_LOG` string means to logpolicy what it means to `EnvFilter` 0.3, asked the
//! same questions: directive strings generated from a grammar of the forms services use
//! (and the forms that trip them up), each asked about random `(target, level)` probes,
//! answered by the real `EnvFilter` and by a `PolicyFilter` whose baseline is the string.
//!
//! Where the answers may differ, the difference is one of the documented ones, and the
//! test encodes each of them as a rewrite of what `EnvFilter` is given:
//!
//! 1. whitespace around an entry is trimmed (`EnvFilter` takes `info ` as a target and
//!    misreads entries with leading whitespace);
//! 2. span and field filters (`a[span{f=1}]=debug`) are refused (skipped);
//! 3. targets with whitespace or control characters are refused (skipped);
//! 4. targets longer than `MAX_TARGET_LEN` bytes are refused (skipped);
//! 5. a target matches at `::` boundaries: `a::b` governs `a::b::c`, never `a::bc`
//!    (per probe, the directives that govern it only by raw prefix are removed);
//! 6. a string with no valid level directive at all leaves the default at `info`
//!    (`EnvFilter::from_default_env` would say `error`, `EnvFilter::new("")` nothing);
//! 7. `@` entries are logpolicy settings (`EnvFilter` refuses every one).
//!
//! Everything else (bare levels, several of them, numbers, empty levels, case, `warning`,
//! quotes, junk first characters, braces in targets, `=` in levels) must agree exactly,
//! and so must which entries are accepted. The seed is fixed; set `DIFF_SEED` to try
//! others and `DIFF_STRINGS` for more strings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::str::FromStr;

use logpolicy::policy::MAX_TARGET_LEN;
use logpolicy::{Directives, Policy, PolicyFilter, PolicyLayer};
use tracing_core::callsite::{Callsite, Identifier};
use tracing_core::field::FieldSet;
use tracing_core::metadata::Kind;
use tracing_core::subscriber::{Interest, Subscriber};
use tracing_core::{Level, Metadata};
use tracing_subscriber::filter::{Directive, EnvFilter};
use tracing_subscriber::layer::SubscriberExt;

/// Strings per run; each is asked `PROBES` questions.
const STRINGS: usize = 25_000;
const PROBES: usize = 6;

struct ProbeSite;
static PROBE_SITE: ProbeSite = ProbeSite;
static PROBE_META: Metadata<'static> = Metadata::new(
    "probe",
    "probe",
    Level::INFO,
    None,
    None,
    None,
    FieldSet::new(&[], Identifier(&PROBE_SITE)),
    Kind::EVENT,
);
impl Callsite for ProbeSite {
    fn set_interest(&self, _: Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        &PROBE_META
    }
}

fn probe(target: &str, level: Level) -> Metadata<'_> {
    Metadata::new(
        "probe",
        target,
        level,
        None,
        None,
        None,
        FieldSet::new(&[], Identifier(&PROBE_SITE)),
        Kind::EVENT,
    )
}

/// SplitMix64: small, seeded, reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, in_n: usize) -> bool {
        self.below(in_n) == 0
    }
}

const TARGETS: &[&str] = &[
    "a",
    "a::b",
    "a::bc",
    "a::b::c",
    "ab",
    "b",
    "a:b",
    "crate1",
    "crate1::mod1",
    "crate1::mod2",
    "crate2",
    "tokio",
    "tokio::net",
    "tokio_util",
    "kube",
    "kube_client",
    "info",
    "warning",
    "Info",
    "3",
    "7",
    "a_b",
    "a-b",
    "::a",
    "é",
    "a{b}",
    "a'b",
    "a\"b",
    "a(b)",
    "a@b",
    "a*",
];
const LEVELS: &[&str] = &[
    "off", "error", "warn", "info", "debug", "trace", "OFF", "Info", "DEBUG", "tRaCe", "warning",
    "verbose", "0", "1", "2", "3", "4", "5", "6", "+3", "03", "-1", "", "'info'", "\"info\"",
    " info", "info ", "b=c", "info[x]",
];
const JUNK: &[&str] = &[
    "*=info",
    "*",
    "'info'",
    "\"info\"",
    "!",
    "+3",
    ".a=info",
    "=3",
    "=",
    "a b=info",
    "a\tb",
    "a[span]=debug",
    "[{x=1}]=debug",
    "a[{x}]=info",
    "[span]",
    "a=b=c",
    "@always_keep=warn",
    "@always_keep=error",
    "@sample(a)=1/0",
    "@x",
    "@",
    "→=info",
    "é=debug",
    "a\u{1}b=info",
    "#",
    "a,",
];
/// Probes are the targets above and these: below them, beside them, near a boundary.
const MORE_PROBE_TARGETS: &[&str] = &[
    "a::b::c::d",
    "a::",
    "abc",
    "c",
    "crate1::mod2::x",
    "tokio::net::tcp",
    "a{b}::x",
    "a b",
    "probe",
];

fn long_target(rng: &mut Rng) -> String {
    let len = [
        MAX_TARGET_LEN - 2,
        MAX_TARGET_LEN,
        MAX_TARGET_LEN + 1,
        10_000,
    ][rng.below(4)];
    "x".repeat(len)
}

fn entry(rng: &mut Rng) -> String {
    let core = match rng.below(12) {
        0 | 1 => rng.pick(LEVELS).to_owned(),
        2 => rng.pick(TARGETS).to_owned(),
        3..=7 => format!("{}={}", rng.pick(TARGETS), rng.pick(LEVELS)),
        8 => rng.pick(JUNK).to_owned(),
        9 => format!(
            "{}::{}={}",
            rng.pick(TARGETS),
            rng.pick(TARGETS),
            rng.pick(LEVELS)
        ),
        10 if rng.chance(4) => format!("{}={}", long_target(rng), rng.pick(LEVELS)),
        _ => format!("{}={}", rng.pick(TARGETS), rng.pick(&LEVELS[..6])),
    };
    let pad = [" ", "  ", "\t", "\n", " \n"];
    match rng.below(8) {
        0 => format!("{}{core}", rng.pick(&pad)),
        1 => format!("{core}{}", rng.pick(&pad)),
        _ => core,
    }
}

fn directive_string(rng: &mut Rng) -> String {
    let n = rng.below(6);
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push_str(if rng.chance(10) { ",," } else { "," });
        }
        s.push_str(&entry(rng));
    }
    if rng.chance(10) {
        s.push(',');
    }
    s
}

/// What `EnvFilter` is given for one entry, after the documented differences 1-4:
/// `Ok` with the trimmed entry's directive, `Err(None)` when `EnvFilter` refuses the
/// entry itself, `Err(Some(n))` when difference `n` (2-4) says logpolicy refuses it.
fn env_filter_entry(raw: &str) -> Result<Directive, Option<usize>> {
    let entry = raw.trim(); // difference 1
    let directive = Directive::from_str(entry).map_err(|_| None)?;
    if entry
        .find(['=', '['])
        .is_some_and(|i| entry.as_bytes()[i] == b'[')
    {
        return Err(Some(2));
    }
    if let Some(target) = target_of(&directive) {
        if target.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Some(3));
        }
        if target.len() > MAX_TARGET_LEN {
            return Err(Some(4));
        }
    }
    Ok(directive)
}

/// The target of a static directive, from its display form (`target=level` or `level`).
fn target_of(d: &Directive) -> Option<String> {
    d.to_string().split_once('=').map(|(t, _)| t.to_owned())
}

fn boundary_matches(prefix: &str, target: &str) -> bool {
    target.starts_with(prefix)
        && (target.len() == prefix.len() || target[prefix.len()..].starts_with("::"))
}

fn env_filter(directives: &[Directive]) -> EnvFilter {
    directives
        .iter()
        .fold(EnvFilter::default(), |f, d| f.add_directive(d.clone()))
}

#[test]
fn every_answer_is_env_filter_s_or_a_documented_difference() {
    let seed = std::env::var("DIFF_SEED").map_or(0x5EED_2026, |s| s.parse().unwrap());
    let strings = std::env::var("DIFF_STRINGS").map_or(STRINGS, |s| s.parse().unwrap());
    let mut rng = Rng(seed);
    let levels = [
        Level::TRACE,
        Level::DEBUG,
        Level::INFO,
        Level::WARN,
        Level::ERROR,
    ];
    let (mut cases, mut by_difference) = (0usize, [0usize; 7]);
    for _ in 0..strings {
        let s = directive_string(&mut rng);
        // Which entries are accepted: the same, but for the documented differences.
        for raw in s.split(',').filter(|e| !e.trim().is_empty()) {
            let ours = raw.parse::<Directives>().is_ok();
            let theirs = env_filter_entry(raw);
            if raw != raw.trim() && Directive::from_str(raw.trim()).is_ok() {
                by_difference[0] += 1; // difference 1
            }
            if raw.trim().starts_with('@') {
                by_difference[6] += usize::from(ours); // difference 7
                assert!(theirs.is_err());
                continue;
            }
            if let Err(Some(n)) = theirs {
                by_difference[n - 1] += 1;
            }
            assert_eq!(
                ours,
                theirs.is_ok(),
                "entry {raw:?} of {s:?}: accepted by logpolicy {ours}, EnvFilter says {theirs:?}"
            );
        }
        let given: Vec<Directive> = s
            .split(',')
            .filter_map(|e| env_filter_entry(e).ok())
            .collect();
        let (directives, _) = Directives::parse_lossy(&s);
        let filter = PolicyFilter::new(Policy::new(vec![PolicyLayer::baseline(directives)]));
        let whole = tracing_subscriber::registry().with(env_filter(&given));
        for _ in 0..PROBES {
            let target = if rng.chance(20) {
                long_target(&mut rng)
            } else {
                let pool = if rng.chance(3) {
                    MORE_PROBE_TARGETS
                } else {
                    TARGETS
                };
                rng.pick(pool).to_owned()
            };
            let level = levels[rng.below(levels.len())];
            let meta = probe(&target, level);
            let ours = filter.enabled(&meta);
            let theirs = if given.is_empty() {
                by_difference[5] += 1; // difference 6
                level <= Level::INFO
            } else {
                let governs_by_raw_prefix_only = |d: &Directive| {
                    target_of(d)
                        .is_some_and(|t| target.starts_with(&t) && !boundary_matches(&t, &target))
                };
                if given.iter().any(&governs_by_raw_prefix_only) {
                    by_difference[4] += 1; // difference 5
                    let kept: Vec<_> = given
                        .iter()
                        .filter(|d| !governs_by_raw_prefix_only(d))
                        .cloned()
                        .collect();
                    tracing_subscriber::registry()
                        .with(env_filter(&kept))
                        .enabled(&meta)
                } else {
                    whole.enabled(&meta)
                }
            };
            assert_eq!(
                ours, theirs,
                "directives {s:?}, probe target {target:?} at {level}: logpolicy says {ours}, EnvFilter {theirs} (ours read it as {:?})",
                Directives::parse_lossy(&s).0.to_string()
            );
            cases += 1;
        }
    }
    assert!(cases >= strings * PROBES);
    // The grammar reaches every encoded difference (else it no longer tests them).
    assert!(by_difference.iter().all(|&n| n > 0), "{by_difference:?}");
    println!("{cases} cases; cases per difference 1-7: {by_difference:?}");
}
