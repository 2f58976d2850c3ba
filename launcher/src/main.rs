//! `crdplane`: the launcher binary (see the crate docs).
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "crdplane",
    about = "Kubernetes-compatible API server for CRDs and custom resources"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the whole stack (Redis, storage, validation, registry, gateway) on this machine.
    Up {
        /// Gateway address.
        #[arg(long, default_value = "127.0.0.1:6443")]
        listen: String,
        /// Where Redis data (AOF), logs and the kubeconfig live.
        #[arg(long, default_value = ".crdplane")]
        data_dir: PathBuf,
        /// Where to write the kubeconfig (default: <data-dir>/kubeconfig).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Use this Redis instead of starting one (redis://host:port or redis+unix:///path).
        #[arg(long)]
        redis_url: Option<String>,
        /// Tenant of requests without a /clusters/<tenant> prefix.
        #[arg(long, default_value = "default")]
        default_tenant: String,
        /// When a write is acknowledged: `fsync` (on disk), `everysec` (a machine crash can
        /// lose ~2 s of acknowledged writes) or `memory` (Redis without persistence).
        #[arg(long, default_value = "fsync", value_parser = ["fsync", "everysec", "memory"])]
        durability: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Up {
            listen,
            data_dir,
            kubeconfig,
            redis_url,
            default_tenant,
            durability,
        } => {
            crdplane::up(crdplane::UpConfig {
                listen,
                data_dir,
                kubeconfig,
                redis_url,
                default_tenant,
                durability,
            })
            .await
        }
    }
}
