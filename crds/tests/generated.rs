//! The committed CRD YAML in the chart is exactly what the Rust types generate.

#[test]
fn committed_crds_match_the_types() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../chart/terdut-operator/crds");
    let rendered = terdut_crds::manifest::rendered().unwrap();
    let mut committed: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    committed.sort();
    let mut expected: Vec<_> = rendered.iter().map(|(f, _)| f.clone()).collect();
    expected.sort();
    assert_eq!(
        committed, expected,
        "chart CRD files differ from the kinds: run `just crds`"
    );
    for (file, yaml) in rendered {
        let on_disk = std::fs::read_to_string(dir.join(&file)).unwrap();
        assert!(
            on_disk == yaml,
            "{file} is stale: run `just crds` and commit the result"
        );
    }
}
