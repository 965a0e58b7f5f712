//! `accuracy`: runs every row of the reference files (benches/criterion/accuracy/)
//! on its device model and prints measured, modelled and the error, as a
//! markdown table or (`--json`) one object per row for the VM report.
//!
//! ```text
//! cargo run -p bius-benches --bin accuracy [-- --json] [REFERENCE...]
//! ```

use std::process::ExitCode;

use bius_benches::accuracy::{AccuracyError, Reference, Set};

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|arg| arg == "--json");
    args.retain(|arg| arg != "--json");
    if args.is_empty() {
        args = Reference::built_in_names().map(String::from).collect();
    }
    match run(&args, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("accuracy: {err} ({})", err.errno());
            ExitCode::FAILURE
        }
    }
}

fn run(names: &[String], json: bool) -> Result<(), AccuracyError> {
    let mut objects = Vec::new();
    for name in names {
        let reference = Reference::built_in(name)?;
        if !json {
            println!("\n### {} (`{}`)\n", reference.drive, reference.profile);
            println!("Source: {}\n", reference.source);
            println!("| set | row | metric | measured | modelled | error | target | result |");
            println!("|---|---|---|---:|---:|---:|---:|---|");
        }
        for row in &reference.rows {
            let result = reference.evaluate(row)?;
            let verdict = match (result.within, &row.miss) {
                (true, _) => "pass".to_string(),
                (false, Some(why)) => format!("miss: {why}"),
                (false, None) => "**fail**".to_string(),
            };
            let set = match row.set {
                Set::Calibration => "calibration",
                Set::Validation => "validation",
            };
            if json {
                objects.push(format!(
                    "{{\"reference\": \"{name}\", \"profile\": \"{}\", \"set\": \"{set}\", \"row\": \"{}\", \
                     \"metric\": \"{:?}\", \"unit\": \"{}\", \"measured\": {}, \"modelled\": {}, \
                     \"error\": {}, \"target\": {}, \"vm\": {}, \"source\": \"{}\"}}",
                    reference.profile,
                    row.name,
                    row.metric,
                    row.unit,
                    row.measured,
                    result.modelled,
                    result.error,
                    row.set.target(),
                    row.vm.as_ref().map_or("null".into(), |job| format!("\"{job}\"")),
                    row.source.replace('"', "'"),
                ));
            } else {
                println!(
                    "| {set} | {} | {:?} | {:.4} {unit} | {:.4} {unit} | {:+.1}% | ±{:.0}% | {verdict} |",
                    row.name,
                    row.metric,
                    row.measured,
                    result.modelled,
                    result.error * 100.0,
                    row.set.target() * 100.0,
                    unit = row.unit,
                );
            }
        }
    }
    if json {
        println!("[\n{}\n]", objects.join(",\n"));
    }
    Ok(())
}
