//! A child process that is killed and started again with the same command line, for runs that
//! crash what they test on purpose (`just chaos`, `just bench-rss`). Every incarnation appends
//! to one log behind a marker line (`=== <label> start #N at HH:MM:SS`), so a failure can be
//! traced to the incarnation that caused it (docs/reliability.md "`just chaos`").

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::signal::{Signal, send};
use crate::time_of_day::hms_utc;

#[derive(Debug)]
pub struct Restartable {
    label: String,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

impl Restartable {
    /// `label` names it in the log's marker lines (e.g. `chaos: operator`); the child inherits
    /// this process's environment plus what [`env`](Self::env) adds.
    pub fn new(
        label: impl Into<String>,
        program: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Self {
        Self {
            label: label.into(),
            program: program.into(),
            args: vec![],
            env: vec![],
            log: log.into(),
            child: None,
            starts: 0,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts one more incarnation, its output appended to the log behind a marker line.
    pub fn start(&mut self) -> anyhow::Result<()> {
        self.starts += 1;
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        writeln!(
            out,
            "=== {} start #{} at {}",
            self.label,
            self.starts,
            hms_utc()
        )?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", self.program.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL and wait: no shutdown hook runs, which is the point. Nothing when it is not
    /// running.
    pub fn kill(&mut self) {
        if let Some(child) = self.child.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, for a clean stop; [`reap`](Self::reap) waits for it.
    pub fn terminate(&mut self) -> anyhow::Result<()> {
        match self.pid() {
            Some(pid) if self.running() => send(pid, Signal::Term),
            _ => Ok(()),
        }
    }

    /// Waits until the process has exited, SIGKILLing it after `limit`.
    pub fn reap(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.running() {
            if Instant::now() > deadline {
                self.kill();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the current incarnation is alive (false before the first start).
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The pid of the current incarnation, alive or not.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How many times it was started.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

impl Drop for Restartable {
    /// A run that ends early (an error, a panic) leaves no process behind.
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incarnations_share_one_log_behind_markers() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("p.log");
        let mut p = Restartable::new("t: sleeper", "sleep", &log).args(["30"]);
        assert!(!p.running());
        p.start().unwrap();
        assert!(p.running());
        p.kill();
        assert!(!p.running());
        p.start().unwrap();
        p.terminate().unwrap();
        p.reap(Duration::from_secs(5));
        assert!(!p.running());
        let text = std::fs::read_to_string(&log).unwrap();
        let markers: Vec<&str> = text.lines().filter(|l| l.starts_with("=== ")).collect();
        assert_eq!(markers.len(), 2, "{text}");
        assert!(
            markers[1].starts_with("=== t: sleeper start #2 at "),
            "{text}"
        );
        assert_eq!(p.starts(), 2);
    }
}
