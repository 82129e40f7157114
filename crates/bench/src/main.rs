//! The `ferrokv-bench` binary: parses arguments and runs a command.
#![forbid(unsafe_code)]

use clap::Parser;
use ferrokv_bench::cli::{compare, run, Cli, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Run(args) => run(args).map(|_| ()),
        Command::Compare(args) => compare(args).map(|_| ()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferrokv-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
