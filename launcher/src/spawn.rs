//! Starting child processes that die with the process that started them.
//!
//! Every child of the stack (Redis and the four services, for `crdplane up` and for the test
//! harness) is started through [`spawn_tied`]: before `exec` the child asks Linux for a
//! parent-death signal (`prctl(PR_SET_PDEATHSIG, SIGTERM)`), so when the launcher dies — even
//! by SIGKILL, even in the middle of starting the stack — the kernel sends each child SIGTERM
//! and nothing is left running. (This is what a kubelet gets from running static pods in
//! their own cgroup; a single launcher process has only this.)
//!
//! Linux delivers the signal when the *thread* that forked the child exits, not the process.
//! Callers may start children from any thread (a test's thread, a `spawn_blocking` thread
//! that exits when idle), so every fork happens on one spawner thread that lives as long as
//! the process.
//!
//! Not on the request path. On other systems the parent-death signal is not set.

use std::io;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::mpsc::{Sender, channel};

type Job = (Command, Sender<io::Result<Child>>);

/// The spawner thread's queue (started on first use, lives until the process exits).
static SPAWNER: Mutex<Option<Sender<Job>>> = Mutex::new(None);

/// Starts `cmd` so that the child gets SIGTERM when this process dies (see the module docs).
pub fn spawn_tied(mut cmd: Command) -> io::Result<Child> {
    set_parent_death_signal(&mut cmd);
    let (reply, answer) = channel();
    {
        let mut guard = SPAWNER.lock().unwrap_or_else(|e| e.into_inner());
        let tx = guard.get_or_insert_with(|| {
            let (tx, rx) = channel::<Job>();
            std::thread::Builder::new()
                .name("crdplane-spawner".into())
                .spawn(move || {
                    for (mut cmd, reply) in rx {
                        let _ = reply.send(cmd.spawn());
                    }
                })
                .expect("start the spawner thread");
            tx
        });
        tx.send((cmd, reply))
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    }
    answer
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

/// Installs the `pre_exec` hook that sets the parent-death signal in the child.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_parent_death_signal(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // Only the spawner thread forks, so the parent of the child is this process.
    let parent = rustix::process::getpid();
    // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe
    // work is allowed. It makes two raw system calls through rustix (prctl and getppid: no
    // allocation, no lock, no shared state) and builds an io::Error from a plain errno.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
            // The parent may have died between fork and prctl: then no signal will come.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc_esrch()));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_cmd: &mut Command) {}

/// `ESRCH` ("no such process"): the parent the child was started for is gone.
#[cfg(target_os = "linux")]
fn libc_esrch() -> i32 {
    rustix::io::Errno::SRCH.raw_os_error()
}
