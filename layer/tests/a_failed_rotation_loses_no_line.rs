//! When a rotating file cannot be rotated (here `api.log.1` is a directory, so renaming
//! the full file onto it fails), every line still reaches the file at hand, the failure
//! is counted as an I/O error, and the next batch tries again: once the obstacle is gone,
//! rotation resumes. Real files, the real writer thread.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use logpolicy::writer::{Output, Rotation, Writer, WriterConfig};
use tracing_core::Level;

fn line(n: usize) -> String {
    format!("{{\"n\":{n:06},\"pad\":\"{}\"}}\n", "x".repeat(100))
}

#[test]
fn a_failed_rotation_loses_no_line() {
    let d = common::fresh_dir("rotation-failed");
    let rotation = Rotation::new(d.join("api.log"), 4096, 1);
    // A non-empty directory where the first rotated file must go.
    std::fs::create_dir_all(rotation.rotated(1).join("occupied")).unwrap();

    let (writer, guard) =
        Writer::new(WriterConfig::new(Output::RotatingFile(rotation.clone()))).unwrap();
    for n in 0..200 {
        assert!(writer.write_line(Level::INFO, false, line(n).as_bytes()));
    }
    assert!(writer.flush(Duration::from_secs(10)));
    let stats = writer.stats();
    let text = std::fs::read_to_string(&rotation.path).unwrap();
    assert_eq!(
        text,
        (0..200).map(line).collect::<String>(),
        "every line, in order"
    );
    assert_eq!(stats.rotations, 0);
    assert!(stats.io_errors >= 1, "the failed rotation is counted");
    assert!(stats.last_io_error.is_some());
    assert_eq!(stats.level(Level::INFO).written, 200);
    assert!(stats.is_balanced());

    // The obstacle goes; the next batch rotates the oversized file away.
    std::fs::remove_dir_all(rotation.rotated(1)).unwrap();
    for n in 200..210 {
        assert!(writer.write_line(Level::INFO, false, line(n).as_bytes()));
    }
    drop(guard);
    let stats = writer.stats();
    assert_eq!(stats.rotations, 1);
    assert_eq!(
        std::fs::read_to_string(rotation.rotated(1)).unwrap(),
        text,
        "the oversized file, whole"
    );
    assert_eq!(
        std::fs::read_to_string(&rotation.path).unwrap(),
        (200..210).map(line).collect::<String>()
    );
    assert_eq!(stats.level(Level::INFO).written, 210);
    std::fs::remove_dir_all(d).unwrap();
}
