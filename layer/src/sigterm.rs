//! What is queued is written when the process is told to terminate (`SIGTERM`) by
//! someone who does not wait for it to finish on its own: Kubernetes stops a pod with
//! `SIGTERM`, and a service that handles only `SIGINT` (tokio's `ctrl_c()`) or nothing
//! would otherwise die at once, its queued lines with it, without a trace.
//!
//! # What happens
//!
//! [`init`](crate::init), [`Builder::try_init`](crate::Builder::try_init) and
//! [`Builder::layer`](crate::Builder::layer) (the paths that also set the global `log`
//! logger and the panic hook) install a `SIGTERM` handler **only if the process has none**:
//! the signal's disposition is the default one (`SIG_DFL`). A service that set its own
//! handler, or ignores the signal, before logging starts is left alone.
//!
//! When `SIGTERM` arrives and the handler is still logpolicy's:
//! 1. the handler wakes a thread of logpolicy's (`logpolicy-sigterm`, started with the
//!    handler, idle until then) and returns: nothing else runs in the signal handler;
//! 2. that thread stops the writer as dropping [`Logging`](crate::Logging) does, but
//!    within [`SIGTERM_FLUSH_TIMEOUT`] (2 s): what is queued is written if the output
//!    takes it by then; what it does not take is counted as `shutdown` drops and
//!    reported in one last `dropped events` line, to the output if it takes it at
//!    once, else to stderr (see [`WriterGuard::finish`](crate::writer::WriterGuard::finish));
//!    lines logged meanwhile are counted as `shutdown` drops too;
//! 3. it puts back the default disposition and raises `SIGTERM` again: the process ends
//!    as `SIGTERM` would have ended it (killed by signal 15, exit status 143 in a shell;
//!    no destructors, no `atexit`), at most 2 s later (on the portable write path, 3 s:
//!    see [the writer's platforms](crate::writer#platforms)).
//!
//! A service that handles `SIGTERM` itself keeps its own graceful shutdown: a handler
//! installed after logging started (by `tokio::signal::unix::signal`, `signal-hook`,
//! `ctrlc` or `sigaction`) replaces logpolicy's, and when a library such as
//! `signal-hook` (which tokio uses) calls the handler it replaced, logpolicy's sees that
//! it is no longer the installed one and does nothing. The service's own path then
//! drops `Logging`, which flushes within the writer's `flush_timeout`.
//!
//! Turn it off with [`Builder::flush_on_sigterm`](crate::Builder::flush_on_sigterm)`(false)`
//! or `LOGPOLICY_FLUSH_ON_SIGTERM=false` ([`FLUSH_ON_SIGTERM_VAR`](crate::FLUSH_ON_SIGTERM_VAR); also `0`, `off`, `no`): `SIGTERM` then ends the
//! process at once, as without logpolicy. Nothing of this exists off Unix.
//!
//! # The unsafe code
//!
//! Installing a signal handler and asking for the current one have no safe interface
//! in the standard library, `rustix` or `signal-hook` (whose registry calls every
//! handler it replaced, so it cannot tell a service's own handler apart). This module
//! is one of the two of the crate allowed `unsafe` (the other is the formatter's `Room`;
//! a test holds this), for `sigaction`,
//! `raise`, and the signal handler itself, which only calls `sigaction` and `write`
//! (both async-signal-safe) and touches one atomic.

#![allow(unsafe_code)]

use std::io::Read;
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::writer::Writer;

/// How long the termination flush waits for the output to take what is queued.
pub const SIGTERM_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// The name of the thread that flushes at `SIGTERM`.
pub const THREAD_NAME: &str = "logpolicy-sigterm";

/// The writer the termination flush stops: the last one installed.
static WRITER: Mutex<Option<Writer>> = Mutex::new(None);

/// The end of the socket pair the handler writes a byte to; -1 before the install.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

/// What [`install`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Installed {
    /// The handler is logpolicy's now (or was already: the writer is this one now).
    Ours,
    /// The process has a handler of its own, or ignores the signal: left alone.
    Theirs,
    /// The flush thread or its socket could not be made: nothing installed.
    Failed,
}

/// Installs the termination flush for `writer` if `SIGTERM` has its default
/// disposition (see the module's docs).
pub(crate) fn install(writer: &Writer) -> Installed {
    let mut slot = WRITER.lock().unwrap_or_else(PoisonError::into_inner);
    if WAKE_FD.load(Ordering::Acquire) >= 0 && current_is_ours() {
        *slot = Some(writer.clone());
        return Installed::Ours;
    }
    if !current_is_default() {
        return Installed::Theirs;
    }
    let Ok((wake, woken)) = UnixStream::pair() else {
        return Installed::Failed;
    };
    if wake.set_nonblocking(true).is_err() {
        return Installed::Failed;
    }
    let spawned = std::thread::Builder::new()
        .name(THREAD_NAME.to_owned())
        .spawn(move || flush_then_terminate(woken));
    if spawned.is_err() {
        return Installed::Failed;
    }
    *slot = Some(writer.clone());
    // The descriptor lives as long as the process: the handler may write to it at any
    // time. (One of a previous install, whose handler was replaced since, stays open
    // too, and its idle thread waits on it: the handler may have read it just before.)
    WAKE_FD.store(wake.into_raw_fd(), Ordering::Release);
    if set_handler(ours()) {
        Installed::Ours
    } else {
        Installed::Theirs
    }
}

/// [`on_sigterm`] as `sigaction` takes and reports it.
fn ours() -> libc::sighandler_t {
    on_sigterm as *const () as libc::sighandler_t
}

/// The disposition of `SIGTERM`, as `sigaction` reports it.
fn current_handler() -> Option<libc::sighandler_t> {
    // SAFETY: `sigaction` with a null new action only reads the disposition into
    // `old`, a plain C struct for which all zeroes is a valid value.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) == 0)
            .then_some(old.sa_sigaction)
    }
}

fn current_is_default() -> bool {
    current_handler() == Some(libc::SIG_DFL)
}

fn current_is_ours() -> bool {
    current_handler() == Some(ours())
}

/// Sets `SIGTERM`'s handler to `handler` (`SIG_DFL` or [`on_sigterm`]) if it is still
/// the default one or ours; returns whether it did (a handler set meanwhile by
/// another thread is put back).
fn set_handler(handler: libc::sighandler_t) -> bool {
    // SAFETY: `new` is a valid action: `handler` is `SIG_DFL` or an `extern "C"
    // fn(c_int)` that is async-signal-safe (see `on_sigterm`), with an empty mask;
    // `old` receives the previous action, which is put back unchanged if it was
    // neither the default nor ours.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler;
        new.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTERM, &new, &mut old) != 0 {
            return false;
        }
        let was = old.sa_sigaction;
        if was != libc::SIG_DFL && was != ours() {
            libc::sigaction(libc::SIGTERM, &old, std::ptr::null_mut());
            return false;
        }
        true
    }
}

/// The signal handler: if it is still the installed handler (a library that replaced
/// it may call it on), wakes the flush thread. Only async-signal-safe calls: `sigaction`
/// and `write`; `errno` is left as it was.
extern "C" fn on_sigterm(_: libc::c_int) {
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd < 0 || !current_is_ours() {
        return;
    }
    let saved = errno::get();
    // SAFETY: `fd` is the socket's write end, open for the life of the process (it is
    // never closed while it is in `WAKE_FD`); one byte from a valid buffer. A full
    // socket (several signals) fails with EAGAIN: the thread is awake already.
    unsafe {
        libc::write(fd, [1u8].as_ptr().cast(), 1);
    }
    errno::set(saved);
}

/// The flush thread: waits for the handler's byte, stops the writer within
/// [`SIGTERM_FLUSH_TIMEOUT`], then ends the process as `SIGTERM` would have.
fn flush_then_terminate(mut woken: UnixStream) {
    let mut byte = [0u8];
    loop {
        match woken.read(&mut byte) {
            Ok(1) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The socket was closed: a later install replaced this one.
            _ => return,
        }
    }
    let writer = WRITER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(writer) = writer {
        // Reports what the output did not take (see `WriterGuard::finish`).
        writer.stop_within(SIGTERM_FLUSH_TIMEOUT);
    }
    set_handler(libc::SIG_DFL);
    // SAFETY: plain calls with valid arguments: an empty set with SIGTERM added, and
    // `raise`, which sends SIGTERM to this thread (where it is not blocked), whose
    // default action ends the process.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(libc::SIGTERM);
    }
    // Not reached unless SIGTERM's disposition was changed again meanwhile: end as a
    // shell reports a death by SIGTERM.
    std::thread::sleep(Duration::from_secs(1));
    std::process::exit(128 + libc::SIGTERM);
}

/// `errno`, kept across the handler's `write`.
mod errno {
    /// The calling thread's `errno`, where this platform says where it is.
    fn location() -> Option<*mut libc::c_int> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        // SAFETY: returns the calling thread's `errno`, always valid.
        return Some(unsafe { libc::__errno_location() });
        #[cfg(any(
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "dragonfly"
        ))]
        // SAFETY: returns the calling thread's `errno`, always valid.
        return Some(unsafe { libc::__error() });
        // Elsewhere `errno` is not restored (a failed `write` in the handler may change it).
        #[allow(unreachable_code)]
        None
    }

    pub(super) fn get() -> libc::c_int {
        // SAFETY: the calling thread's `errno`, valid for the thread's life.
        location().map_or(0, |p| unsafe { *p })
    }

    pub(super) fn set(value: libc::c_int) {
        if let Some(p) = location() {
            // SAFETY: the calling thread's `errno`, valid for the thread's life.
            unsafe { *p = value }
        }
    }
}
