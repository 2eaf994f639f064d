//! Signals to other processes. The workspace forbids `unsafe` (so no `libc::kill`); `kill(1)`
//! is a process away, which is cheap next to what these signals set off.

use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
    Usr1,
    Usr2,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Self::Term => "TERM",
            Self::Kill => "KILL",
            Self::Usr1 => "USR1",
            Self::Usr2 => "USR2",
        }
    }
}

/// Sends `signal` to `pid`; fails when there is no such process.
pub fn send(pid: u32, signal: Signal) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args(["-s", signal.name(), &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -s {} {pid} failed", signal.name());
    }
    Ok(())
}
