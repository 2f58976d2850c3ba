//! `crdplane`: the launcher binary (see the crate docs; flags in `crdplane::config`).
use clap::Parser;
use crdplane::config::{Cli, Cmd};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Up(up) => {
            up.validate().map_err(anyhow::Error::msg)?;
            crdplane::up(up.config()).await
        }
        Cmd::Pki(p) => crdplane::pki::make(&p.dir, &p.hosts),
    }
}
