//! The end-to-end tests, one module per scenario file, in one test binary: each file
//! used to be a test binary of its own, and each linked kube, hyper and tokio again
//! (35 of them took about 20 CPU minutes to compile, most of a clean test run's build).
//!
//! One binary keeps what separate processes gave the files: the tests of one file run
//! concurrently, as libtest runs them, but never beside another file's. Some files need
//! that: one kills the API server every test talks to, and the figures others check
//! (recovery within 2 s, latencies) assume that no other scenario shares the two CPUs.
//! Each test starts with `one_file_at_a_time(module_path!())`. The operator that a
//! file's tests share is stopped after its last test, as its process's exit stopped it.
//!
//! Run one file's tests with a filter: `cargo test -p logpolicy-e2e --test e2e policies::`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::sync::{Condvar, Mutex, PoisonError};

mod a_pod_that_always_answers_409_is_backed_off;
mod a_pod_that_comes_up_late_gets_its_policy_soon;
mod a_raise_since_first_writes_what_the_pods_recorded;
mod a_replaced_trust_configmap_is_restored_at_once;
mod a_when_raise_reaches_one_customers_requests_on_every_pod;
mod alerts_fire_when_they_should;
mod chart_crd_is_the_generated_one;
mod chart_lints_and_renders;
mod chart_matches_the_operator_and_layer;
mod chart_objects_pass_server_side_dry_run;
mod check_names_what_keeps_a_raise_from_arriving;
mod container_images;
mod crd;
mod each_pod_says_why_a_policy_started_and_when_it_stopped;
mod edit_users_may_use_logpolicies_in_their_namespace_and_view_users_may_read_them;
mod hanging_pods_do_not_delay_live_ones;
mod kubectl_plugin;
mod leader_election;
mod operator_down;
mod pods_that_leave_are_reverted;
mod policies;
mod policies_longer_than_the_operators_limit_are_refused;
mod prometheus_answers_every_alert_and_panel;
mod pypi_tools_are_installed_by_hash;
mod raises_check_their_targets_and_suggest_cuts_what_it_projects;
mod release_artifacts_are_complete_and_checked;
mod the_chart_and_examples_pass_checkov;
mod the_examples_agree_with_each_other;
mod the_operator_recovers_quickly_after_the_api_server_is_killed;
mod the_operator_recovers_quickly_from_an_api_server_outage;
mod the_operators_metrics_need_an_authorised_token;
mod top_agrees_with_what_the_pods_wrote;
mod top_from_prometheus_agrees_with_what_the_pods_wrote;
mod top_watch_redraws_in_place_and_stops_on_ctrl_c;
mod zero_durations_are_refused_and_past_expirations_reported;

/// The file (module) whose tests are running, and how many of them are.
static RUNNING: Mutex<(Option<&'static str>, usize)> = Mutex::new((None, 0));
static CHANGED: Condvar = Condvar::new();

/// Waits until no other file's test is running, and holds its file's place until the
/// returned guard is dropped (also when the test panics).
fn one_file_at_a_time(module_path: &'static str) -> FileTurn {
    // `e2e::policies` or `e2e::policies::inner`: the file is the second segment.
    let file = module_path.split("::").nth(1).unwrap_or(module_path);
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    while running.0.is_some_and(|other| other != file) {
        running = CHANGED
            .wait(running)
            .unwrap_or_else(PoisonError::into_inner);
    }
    running.0 = Some(file);
    running.1 += 1;
    FileTurn
}

/// A running test's place; see [`one_file_at_a_time`].
struct FileTurn;

impl Drop for FileTurn {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        running.1 -= 1;
        if running.1 == 0 {
            // What a file's tests shared ends with them, as it did with their process.
            logpolicy_e2e::Operator::stop_shared();
            running.0 = None;
            CHANGED.notify_all();
        }
    }
}
