//! `targets`: every target the selected pods know, from one read of their ledgers
//! ([`crate::fleet::known_targets`]): the levels its callsites have, the level in force
//! for it now (each distinct value with its pods, when the pods disagree), and on how
//! many of the pods read it is known.
//!
//! A target is known once one of its callsites has run (see `logpolicy::ledger`), so
//! this is the list a `--target` of `raise` is best taken from.
//!
//! Under the table, the pods that record ([`crate::recording`]): their rules, what
//! their recorder holds and since when: how far back a `raise --since` can reach.

use crate::cli::TargetsArgs;
use crate::cluster::Connection;
use crate::exit::{Failure, Result};
use crate::fleet::{self, known_targets, pods_line, KnownTarget, KnownTargets};
use crate::output::{data, table, Format};
use crate::prometheus::{Prometheus, DRILL_DOWN_PODS};
use crate::recording::{read_recordings, recording_table, PodRecording};

/// `targets`.
pub async fn targets(connection: &Connection, args: &TargetsArgs) -> Result<()> {
    args.source.check()?;
    let kube = connection.connect().await?;
    let p = &args.pods;
    let (known, pods, which) = match &args.source.prometheus {
        Some(url) => {
            let selection = crate::prometheus::select(&kube, p).await?;
            let (known, read) = Prometheus::now(url).targets(&kube, &selection).await?;
            eprintln!(
                "targets and pods from Prometheus at {url}; levels now from the {} pods of {} writing the most bytes (at most {DRILL_DOWN_PODS})",
                read.len(),
                selection.which
            );
            (known, read, selection.which)
        }
        None => {
            let pods = fleet::select_noting(&kube, p).await?;
            let (pods, note) = fleet::bounded(pods, args.source.sample_pods.map(usize::from))?;
            if let Some(note) = note {
                eprintln!("{note}");
            }
            let reads = fleet::read_sites(&kube, &pods.pods).await;
            (known_targets(&reads), pods.pods, pods.which)
        }
    };
    let mut recording = read_recordings(&kube, &pods).await;
    recording.retain(PodRecording::records);
    match args.output {
        Format::Table => {
            print!("{}", targets_table(&known, p.all_namespaces));
            print!("{}", recording_table(&recording, p.all_namespaces));
        }
        format => print!(
            "{}",
            data(
                format,
                &WithRecording {
                    known: &known,
                    recording
                }
            )?
        ),
    }
    if known.pods.read == 0 {
        return Err(Failure::error(format!(
            "none of the {} pods ({which}) could be read (each is listed with why)",
            known.pods.selected
        )));
    }
    Ok(())
}

/// `targets -o json|yaml`: the targets, and what the pods that record keep (left out
/// when none does).
#[derive(serde::Serialize)]
struct WithRecording<'a> {
    #[serde(flatten)]
    known: &'a KnownTargets,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    recording: Vec<PodRecording>,
}

/// The levels of a target's callsites, least verbose first: `warn,info,debug`.
pub fn levels_text(t: &KnownTarget) -> String {
    let levels: Vec<&str> = t.levels.iter().map(|l| l.as_str()).collect();
    levels.join(",")
}

/// The level in force: `info` when the pods agree, else each level with its pods,
/// most first: `info (2), debug (1)`.
pub fn level_now_text(t: &KnownTarget) -> String {
    match t.level_now.as_slice() {
        [] => "-".to_owned(),
        [one] => one.level.to_string(),
        many => many
            .iter()
            .map(|l| format!("{} ({})", l.level, l.pods))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// `known` as a table (TARGET, LEVELS, LEVEL NOW, PODS), then the pods read and those
/// that could not be (`namespace/name` when `qualified`).
pub fn targets_table(known: &KnownTargets, qualified: bool) -> String {
    let mut out = String::new();
    if known.targets.is_empty() {
        if known.pods.read > 0 {
            out.push_str("no target known: no callsite of the pods read has run yet\n");
        }
    } else {
        let rows: Vec<Vec<String>> = known
            .targets
            .iter()
            .map(|t| {
                vec![
                    t.target.clone(),
                    levels_text(t),
                    level_now_text(t),
                    format!("{}/{}", t.pods, known.pods.read),
                ]
            })
            .collect();
        out.push_str(&table(&["TARGET", "LEVELS", "LEVEL NOW", "PODS"], &rows));
    }
    out.push_str(&pods_line(known.pods, &known.left_out, qualified));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{Coverage, LevelCount, PodId, SkipReason, Skipped};
    use logpolicy::Level;

    fn known() -> KnownTargets {
        KnownTargets {
            targets: vec![
                KnownTarget {
                    target: "shop::db".into(),
                    levels: vec![Level::Warn, Level::Debug],
                    level_now: vec![LevelCount {
                        level: Level::Info,
                        pods: 2,
                    }],
                    pods: 2,
                },
                KnownTarget {
                    target: "shop::http".into(),
                    levels: vec![Level::Info],
                    level_now: vec![
                        LevelCount {
                            level: Level::Info,
                            pods: 1,
                        },
                        LevelCount {
                            level: Level::Debug,
                            pods: 1,
                        },
                    ],
                    pods: 2,
                },
                KnownTarget {
                    target: "shop::payment".into(),
                    levels: vec![Level::Error, Level::Info],
                    level_now: vec![LevelCount {
                        level: Level::Info,
                        pods: 1,
                    }],
                    pods: 1,
                },
            ],
            pods: Coverage {
                read: 2,
                selected: 3,
            },
            left_out: vec![Skipped {
                pod: PodId {
                    namespace: "shop".into(),
                    name: "shop-2".into(),
                },
                reason: SkipReason::Unreadable,
                why: "pod proxy: 404 Not Found".into(),
            }],
        }
    }

    #[test]
    fn a_table_of_targets_with_their_levels_the_level_now_and_the_pods() {
        assert_eq!(
            targets_table(&known(), false),
            "TARGET          LEVELS       LEVEL NOW             PODS\n\
             shop::db        warn,debug   info                  2/2\n\
             shop::http      info         info (1), debug (1)   2/2\n\
             shop::payment   error,info   info                  1/2\n\
             2/3 pods read; unreadable: shop-2 (pod proxy: 404 Not Found)\n"
        );
        let mut none = known();
        none.targets.clear();
        assert_eq!(
            targets_table(&none, true),
            "no target known: no callsite of the pods read has run yet\n\
             2/3 pods read; unreadable: shop/shop-2 (pod proxy: 404 Not Found)\n"
        );
    }
}
