//! Writes the CRD manifests (`just crds`): one YAML file per kind into the chart's `crds/`
//! folder, or to stdout with `-`. The drift test (crds/tests/generated.rs) fails when the
//! committed files differ from what these types generate.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "chart/terdut-operator/crds".into());
    for (file, yaml) in terdut_crds::manifest::rendered()? {
        if target == "-" {
            print!("{yaml}");
        } else {
            let path = PathBuf::from(&target).join(file);
            std::fs::write(&path, yaml)?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
