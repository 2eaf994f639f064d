//! kubectl, for what a user would type: applying the examples, `kubectl wait`, rollouts,
//! deletes. Reads go through the typed client instead.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

#[derive(Debug, Clone)]
pub struct Kubectl {
    pub bin: PathBuf,
    /// `None`: kubectl's own default (KUBECONFIG, ~/.kube/config).
    pub kubeconfig: Option<PathBuf>,
}

impl Kubectl {
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        if let Some(kc) = &self.kubeconfig {
            c.arg("--kubeconfig").arg(kc);
        }
        c
    }

    /// Runs kubectl; fails with its output when it fails.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        self.run_stdin(args, None)
    }

    /// The same with `stdin` piped in (`-f -`).
    pub fn run_stdin(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        let mut child = self
            .command()
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", self.bin.display()))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            bail!("kubectl {} failed: {}", args.join(" "), text.trim());
        }
        Ok(text)
    }

    /// `kubectl apply --server-side -f <file>`, the way the examples are meant to be applied.
    pub fn apply_file(&self, path: &std::path::Path) -> anyhow::Result<()> {
        self.run(&["apply", "--server-side", "-f", &path.display().to_string()])
            .map(drop)
    }

    pub fn apply_yaml(&self, yaml: &str) -> anyhow::Result<()> {
        self.run_stdin(&["apply", "--server-side", "-f", "-"], Some(yaml))
            .map(drop)
    }
}
