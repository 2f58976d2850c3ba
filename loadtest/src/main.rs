//! `crdplane-load` binary: parses the command line and hands over to the library.
use clap::Parser;

fn main() -> std::process::ExitCode {
    crdplane_load::main_with_args(crdplane_load::config::Args::parse())
}
