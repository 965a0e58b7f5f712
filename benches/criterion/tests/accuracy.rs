//! The device models against measurements of the real drives: every row
//! of every reference file (benches/criterion/accuracy/) run on its model in
//! simulated time; calibration rows within 10 %, validation rows within
//! 20 %, and a row that misses says why in the file (a row marked as a
//! miss that no longer misses fails too, so the file stays true).

use bius_benches::accuracy::Reference;

#[test]
fn every_reference_row_is_within_its_target_or_says_why_not() {
    let mut wrong = Vec::new();
    for name in Reference::built_in_names() {
        let reference = Reference::built_in(name).unwrap();
        for row in &reference.rows {
            let result = reference.evaluate(row).unwrap();
            let line = format!(
                "{name}: {} {:?}: measured {} {unit}, modelled {:.4} {unit} ({:+.1}%)",
                row.name,
                row.metric,
                row.measured,
                result.modelled,
                result.error * 100.0,
                unit = row.unit
            );
            eprintln!("{line}");
            match (result.within, &row.miss) {
                (false, None) => wrong.push(format!("{line}: outside ±{}", row.set.target())),
                (true, Some(_)) => wrong.push(format!("{line}: marked as a miss, but within")),
                _ => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_row_cites_its_source_and_the_files_cite_theirs() {
    for name in Reference::built_in_names() {
        let reference = Reference::built_in(name).unwrap();
        assert!(!reference.source.is_empty(), "{name}");
        assert!(
            reference.rows.iter().all(|row| !row.source.is_empty()),
            "{name}"
        );
    }
}
