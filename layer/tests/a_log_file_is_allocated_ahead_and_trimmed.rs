//! A regular file output gets its disk blocks allocated ahead of its end while the writer
//! runs (its size stays what was written), and a file the writer opened is left without
//! blocks past its end: when the writer stops, and when a rotating file is set aside.
//! Real files, the real writer thread; on a filesystem without `fallocate` only the
//! contents and the trimming are checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use logpolicy::writer::{Output, Rotation, Writer, WriterConfig};
use tracing_core::Level;

const MIB: u64 = 1 << 20;

/// Bytes of disk the file holds.
fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// Whether this directory's filesystem preallocates (`fallocate`, keeping the size).
fn fs_preallocates(dir: &Path) -> bool {
    let probe = dir.join("probe");
    let f = File::create(&probe).unwrap();
    let ok = rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::KEEP_SIZE, 0, MIB).is_ok()
        && f.metadata().unwrap().blocks() * 512 >= MIB;
    drop(f);
    std::fs::remove_file(probe).unwrap();
    ok
}

fn line(n: usize) -> String {
    format!("{{\"n\":{n},\"msg\":\"{}\"}}\n", "y".repeat(60 + n % 50))
}

#[test]
fn a_file_is_allocated_ahead_while_written_and_trimmed_when_the_writer_stops() {
    let d = common::fresh_dir("prealloc-file");
    let preallocates = fs_preallocates(&d);
    let path = d.join("app.log");
    let (writer, guard) = Writer::new(WriterConfig::new(Output::File(path.clone()))).unwrap();
    let mut expected = String::new();
    for n in 0..2_000 {
        let l = line(n);
        assert!(writer.write_line(Level::INFO, false, l.as_bytes()));
        expected.push_str(&l);
    }
    assert!(writer.flush(Duration::from_secs(10)));
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(size, expected.len() as u64, "the size is what was written");
    if preallocates {
        assert!(
            allocated(&path) >= size + 4 * MIB,
            "{} bytes allocated for {size} written",
            allocated(&path)
        );
    }
    drop(guard);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    // Trimmed: at most the last block's rounding (and the filesystem's own metadata).
    assert!(
        allocated(&path) < size + 64 * 1024,
        "{} bytes allocated for {size} after the writer stopped",
        allocated(&path)
    );
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_rotated_file_is_trimmed_when_it_is_set_aside() {
    let d = common::fresh_dir("prealloc-rotation");
    let preallocates = fs_preallocates(&d);
    let rotation = Rotation {
        path: d.join("app.log"),
        max_bytes: 256 * 1024,
        keep: 3,
    };
    let (writer, guard) =
        Writer::new(WriterConfig::new(Output::RotatingFile(rotation.clone()))).unwrap();
    let mut written = 0u64;
    let mut n = 0;
    // Past two rotations: the current file is the third.
    while written < 600 * 1024 {
        let l = line(n);
        assert!(writer.write_line(Level::INFO, false, l.as_bytes()));
        written += l.len() as u64;
        n += 1;
        if n % 400 == 0 {
            assert!(writer.flush(Duration::from_secs(10)));
        }
    }
    assert!(writer.flush(Duration::from_secs(10)));
    assert!(writer.stats().rotations >= 2);
    for k in 1..=2 {
        let p = rotation.rotated(k);
        let size = std::fs::metadata(&p).unwrap().len();
        assert!(size > 0 && size <= rotation.max_bytes);
        assert!(
            allocated(&p) < size + 64 * 1024,
            "{}: {} bytes allocated for {size}",
            p.display(),
            allocated(&p)
        );
    }
    if preallocates {
        let size = std::fs::metadata(&rotation.path).unwrap().len();
        assert!(allocated(&rotation.path) >= size + 4 * MIB);
    }
    drop(guard);
    let size = std::fs::metadata(&rotation.path).unwrap().len();
    assert!(allocated(&rotation.path) < size + 64 * 1024);
    let total: u64 = std::iter::once(rotation.path.clone())
        .chain((1..=3).map(|k| rotation.rotated(k)))
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    assert_eq!(total, written, "every byte is in one of the files");
    std::fs::remove_dir_all(d).unwrap();
}
