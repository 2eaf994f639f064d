//! The committed Argo CD health checks are exactly what `terdut_crds::health` renders from
//! the template and the kinds' reasons (and so is deploy/argocd/argocd-cm.yaml, which embeds
//! them: actors/tests/gitops_health.rs checks that).

#[test]
fn committed_health_checks_match_the_rendering() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/argocd/resource_customizations");
    for (file, script) in terdut_crds::health::rendered() {
        let on_disk = std::fs::read_to_string(dir.join(&file)).unwrap();
        assert!(
            on_disk == script,
            "{file} is stale: run `just health` and commit the result"
        );
    }
}
