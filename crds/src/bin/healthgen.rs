//! Writes the Argo CD health checks (`just health`): one `health.lua` per kind under the
//! given resource_customizations folder, or all to stdout with `-`, rendered by
//! `terdut_crds::health`. The drift test (crds/tests/health.rs) fails when the committed
//! scripts differ from the rendering.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "deploy/argocd/resource_customizations".into());
    for (file, script) in terdut_crds::health::rendered() {
        if target == "-" {
            print!("{script}");
        } else {
            let path = PathBuf::from(&target).join(file);
            std::fs::write(&path, script)?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
