//! `kubectl-logpolicy`: parses the command line and runs it (see the crate's docs).

use std::process::ExitCode;

use clap::Parser;
use kubectl_logpolicy::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kubectl-logpolicy: {e}");
            return ExitCode::from(kubectl_logpolicy::exit::ERROR);
        }
    };
    match runtime.block_on(kubectl_logpolicy::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("kubectl-logpolicy: {failure}");
            ExitCode::from(failure.code)
        }
    }
}
