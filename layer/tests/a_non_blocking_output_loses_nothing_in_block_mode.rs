//! An output opened with `O_NONBLOCK` (a pipe here) returns `EAGAIN` whenever the reader
//! falls behind; in block mode the writer waits for it to become writable and delivers
//! every line, in order, without counting an I/O error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::time::{Duration, Instant};

use logpolicy::writer::{Output, Overflow, Writer, WriterConfig};
use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
use tracing_core::Level;

#[test]
fn a_non_blocking_output_loses_nothing_in_block_mode() {
    let (read_end, write_end) = rustix::pipe::pipe().expect("pipe");
    let flags = fcntl_getfl(&write_end).expect("getfl");
    fcntl_setfl(&write_end, flags | OFlags::NONBLOCK).expect("setfl");
    assert!(fcntl_getfl(&write_end)
        .expect("getfl")
        .contains(OFlags::NONBLOCK));

    // A reader slower than the producer: 8 KiB every 2 ms (~4 MB/s).
    let reader = std::thread::spawn(move || {
        let mut file = std::fs::File::from(read_end);
        let mut all = Vec::new();
        let mut buf = vec![0u8; 8 * 1024];
        let started = Instant::now();
        let mut reads = 0u32;
        loop {
            let due = started + Duration::from_millis(2 * u64::from(reads));
            if let Some(left) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(left); // the reader's speed, not synchronisation
            }
            reads += 1;
            match file.read(&mut buf) {
                Ok(0) | Err(_) => return all,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    });

    let lines = 20_000u64;
    let config = WriterConfig::new(Output::Fd(write_end))
        .capacity_bytes(64 * 1024)
        .overflow(Overflow::Block)
        .flush_timeout(Duration::from_secs(30));
    let (writer, guard) = Writer::new(config).expect("writer");
    for i in 0..lines {
        let (level, keep) = if i % 1000 == 999 {
            (Level::ERROR, true)
        } else {
            (Level::INFO, false)
        };
        let line = format!("{{\"seq\":{i},\"pad\":\"{}\"}}\n", "x".repeat(60));
        assert!(writer.write_line(level, keep, line.as_bytes()), "line {i}");
    }
    drop(guard); // flushes, then closes the write end
    let stats = writer.stats();
    let all = reader.join().expect("reader");

    let text = String::from_utf8(all).expect("utf-8");
    let got: Vec<u64> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
            v["seq"].as_u64().expect("seq")
        })
        .collect();
    eprintln!(
        "non-blocking pipe: {} lines, {} write calls, io errors {}",
        got.len(),
        stats.write_syscalls,
        stats.io_errors
    );
    assert_eq!(got, (0..lines).collect::<Vec<_>>(), "every line, in order");
    assert_eq!(stats.io_errors, 0);
    assert_eq!(stats.dropped_total(), 0);
    assert_eq!(stats.written_total(), lines);
    // The pipe (64 KiB) filled many times: the writer met EAGAIN and waited for it.
    assert!(stats.write_syscalls > 1);
    assert!(stats.is_balanced());
}
