//! # kubectl-logpolicy
//!
//! `kubectl logpolicy raise deploy/shop --target shop::payment=debug --for 15m` creates a
//! temporary `LogPolicy` (the type the operator watches, [`logpolicy_api::LogPolicy`]) for
//! the workload's pods and waits until every opted-in pod acknowledged it, reading the
//! status the operator writes; `list`, `status`, `extend`, `revert` and `effective`
//! manage and explain those policies; `top` and `targets` show what the pods' logging
//! costs and which targets they know, from the pods' own ledgers.
//!
//! The modules, from the bottom up: [`exit`] (exit codes), [`flags`] (flag values),
//! [`selector`] (kubectl's selector syntax, workloads' selectors), [`naming`],
//! [`output`], [`progress`] (what a status says, pure), [`cluster`] (the client, pods,
//! the operator's Lease, a pod's admin endpoint), [`fleet`] (the pods' ledgers read
//! twice a window apart, rates by target, callsite or pod, the targets they know: the
//! arithmetic pure), [`prometheus`] (the same rates from a Prometheus: its queries and
//! answers, pure, and its HTTP API), [`recording`] (what the pods' recording rules keep), [`cli`] (the command line), then the commands: [`ack`] (waiting
//! for pods), [`raise`] (`raise`, `extend`), [`revert`], [`read`] (`list`, `status`,
//! `effective`), [`top`], [`targets`], [`check`] (what keeps a raise from arriving).

pub mod exit;
pub mod flags;
pub mod known;
pub mod naming;
pub mod output;
pub mod progress;
pub mod selector;
pub mod suggest;

pub mod cli;
pub mod cluster;
pub mod cost;
pub mod fleet;
pub mod prometheus;
pub mod recording;

pub mod ack;
pub mod check;
pub mod raise;
pub mod read;
pub mod revert;
pub mod targets;
pub mod top;

use clap::CommandFactory;

use crate::cli::{Cli, Command};

/// Runs the parsed command line; `Ok` or the failure with its exit code.
pub async fn run(cli: Cli) -> exit::Result<()> {
    let c = &cli.connection;
    match &cli.command {
        Command::Raise(args) => raise::raise(c, args).await,
        Command::Extend(args) => raise::extend(c, args).await,
        Command::Revert(args) => revert::revert(c, args).await,
        Command::List(args) => read::list(c, args).await,
        Command::Status(args) => read::status(c, args).await,
        Command::Effective(args) => read::effective(c, args).await,
        Command::Top(args) => top::top(c, args).await,
        Command::Targets(args) => targets::targets(c, args).await,
        Command::Suggest(args) => suggest::suggest(c, args).await,
        Command::Check(args) => check::check(c, args).await,
        Command::Completion { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(
                *shell,
                &mut cmd,
                "kubectl-logpolicy",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}
