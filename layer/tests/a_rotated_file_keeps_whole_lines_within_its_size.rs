//! A rotating file output: every file holds whole lines within `max_bytes` (a line
//! longer than that alone in its file), the files kept are the newest `keep`, in order,
//! with nothing missing between them, and an existing file is continued, its size
//! counted. Real files, the real writer thread.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use logpolicy::writer::{Output, Rotation, Writer, WriterConfig};
use tracing_core::Level;

/// Line `n`: JSON with a padding that varies with `n`, 57 to 250 bytes.
fn line(n: usize) -> String {
    format!(
        "{{\"n\":{n},\"pad\":\"{}\"}}\n",
        "x".repeat(40 + (n * 37) % 191)
    )
}

/// The files of `rotation`, oldest first: `path.keep` .. `path.1`, `path`.
fn files(rotation: &Rotation) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for n in (1..=rotation.keep).rev() {
        let p = rotation.rotated(n);
        if let Ok(text) = std::fs::read_to_string(&p) {
            out.push((p, text));
        }
    }
    out.push((
        rotation.path.clone(),
        std::fs::read_to_string(&rotation.path).unwrap(),
    ));
    out
}

fn write_all(
    rotation: &Rotation,
    lines: impl Iterator<Item = String>,
) -> logpolicy::writer::WriterStats {
    let (writer, guard) =
        Writer::new(WriterConfig::new(Output::RotatingFile(rotation.clone()))).unwrap();
    for (i, l) in lines.enumerate() {
        assert!(writer.write_line(Level::INFO, false, l.as_bytes()));
        if i % 500 == 499 {
            // Several batches, cut at different places.
            assert!(writer.flush(Duration::from_secs(10)));
        }
    }
    drop(guard);
    writer.stats()
}

fn assert_only(dir: &Path, names: &[String]) {
    let mut have: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    have.sort();
    let mut want = names.to_vec();
    want.sort();
    assert_eq!(have, want);
}

#[test]
fn files_hold_whole_lines_within_max_bytes_and_the_newest_are_kept() {
    let d = common::fresh_dir("rotation-bound");
    let rotation = Rotation::new(d.join("api.log"), 8192, 3);
    let total = 3_000;
    let stats = write_all(&rotation, (0..total).map(line));

    let files = files(&rotation);
    assert_eq!(files.len(), 4, "api.log and three rotated files");
    assert_only(
        &d,
        &["api.log", "api.log.1", "api.log.2", "api.log.3"].map(String::from),
    );
    let mut numbers = Vec::new();
    for (path, text) in &files {
        assert!(
            text.len() <= 8192,
            "{}: {} bytes",
            path.display(),
            text.len()
        );
        assert!(
            text.ends_with('\n'),
            "{} ends inside a line",
            path.display()
        );
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            numbers.push(v["n"].as_u64().unwrap() as usize);
        }
    }
    // The newest lines, in order, none missing, up to the last one written.
    let first = numbers[0];
    assert_eq!(numbers, (first..total).collect::<Vec<_>>());
    // Every file but the current one was full: the next line would not have fitted.
    for (i, (path, text)) in files.iter().enumerate().take(files.len() - 1) {
        let next = numbers[files[..=i]
            .iter()
            .map(|(_, t)| t.lines().count())
            .sum::<usize>()];
        assert!(
            text.len() + line(next).len() > 8192,
            "{} was rotated with room for line {next}",
            path.display()
        );
    }
    // What the files hold and the rotations the lines needed (each file's share of the
    // whole run: the same cut rule, applied to all 3,000 lines).
    let mut rotations = 0;
    let mut size = 0;
    for n in 0..total {
        let len = line(n).len();
        if size + len > 8192 {
            rotations += 1;
            size = 0;
        }
        size += len;
    }
    assert_eq!(stats.rotations, rotations);
    assert_eq!(stats.io_errors, 0);
    assert_eq!(stats.level(Level::INFO).written, total as u64);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_line_longer_than_max_bytes_gets_a_file_of_its_own() {
    let d = common::fresh_dir("rotation-long");
    let rotation = Rotation::new(d.join("api.log"), 4096, 5);
    let long = format!("{{\"blob\":\"{}\"}}\n", "y".repeat(10_000));
    let lines = vec![line(1), line(2), long.clone(), line(3)];
    let stats = write_all(&rotation, lines.into_iter());
    let files = files(&rotation);
    let texts: Vec<&str> = files.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            format!("{}{}", line(1), line(2)).as_str(),
            long.as_str(),
            line(3).as_str()
        ]
    );
    assert_eq!(stats.rotations, 2);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn an_existing_file_is_continued_and_its_size_counted() {
    let d = common::fresh_dir("rotation-existing");
    let rotation = Rotation::new(d.join("api.log"), 4096, 1);
    let before = "b".repeat(4_049) + "\n";
    std::fs::write(&rotation.path, &before).unwrap();
    // 4,050 bytes and a line of 57 do not fit in 4,096: the old content is rotated out
    // first.
    let stats = write_all(&rotation, (0..3).map(line));
    assert_eq!(
        std::fs::read_to_string(rotation.rotated(1)).unwrap(),
        before
    );
    assert_eq!(
        std::fs::read_to_string(&rotation.path).unwrap(),
        (0..3).map(line).collect::<String>()
    );
    assert_eq!(stats.rotations, 1);

    // A restart appends to what is there while it fits.
    let stats = write_all(&rotation, (3..5).map(line));
    assert_eq!(
        std::fs::read_to_string(&rotation.path).unwrap(),
        (0..5).map(line).collect::<String>()
    );
    assert_eq!(stats.rotations, 0);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn keeping_none_leaves_only_the_current_file() {
    let d = common::fresh_dir("rotation-none");
    let rotation = Rotation::new(d.join("api.log"), 4096, 0);
    let stats = write_all(&rotation, (0..1_000).map(line));
    assert_only(&d, &["api.log".to_owned()]);
    let text = std::fs::read_to_string(&rotation.path).unwrap();
    assert!(text.len() <= 4096);
    assert!(text.ends_with(&line(999)));
    assert!(stats.rotations > 20);
    std::fs::remove_dir_all(d).unwrap();
}
