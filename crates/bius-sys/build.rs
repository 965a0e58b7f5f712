//! Generates the bindings of `include/linux/bius.h` with bindgen.

use std::env;
use std::path::PathBuf;

use bindgen::callbacks::{DeriveInfo, ParseCallbacks};

/// The records that cross the request and completion streams as bytes:
/// they derive zerocopy's traits, so that they are read from and written
/// to those bytes whole, never field by field.
const RECORDS: [&str; 4] = [
    "bius_request",
    "bius_segment",
    "bius_completion",
    "blk_zone",
];

/// Adds the zerocopy derives to [`RECORDS`].
#[derive(Debug)]
struct Records;

impl ParseCallbacks for Records {
    fn add_derives(&self, info: &DeriveInfo<'_>) -> Vec<String> {
        if RECORDS.contains(&info.name) {
            ["FromBytes", "IntoBytes", "KnownLayout", "Immutable"]
                .map(|name| format!("zerocopy::{name}"))
                .into()
        } else {
            Vec::new()
        }
    }
}

fn main() {
    // A symbolic link to driver/include/uapi/linux/bius.h in the repository,
    // the file itself in the published crate (`cargo package` copies it).
    let header =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("include/linux/bius.h");
    println!("cargo:rerun-if-changed={}", header.display());

    let bindings = bindgen::Builder::default()
        .header(header.to_str().expect("header path is UTF-8"))
        .allowlist_type("bius_.*")
        .allowlist_var("BIUS_.*")
        // <linux/blkzoned.h>, which bius.h includes: the zone descriptor of
        // REPORT_ZONES completions and the BLKREPORTZONE ioctl.
        .allowlist_type("blk_zone.*")
        .allowlist_var("BLKREPORTZONE")
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(true)
        .derive_copy(true)
        .derive_partialeq(true)
        .derive_eq(true)
        .clang_macro_fallback()
        .parse_callbacks(Box::new(Records))
        .generate()
        .expect("bindgen failed on bius.h");

    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(&out).expect("writing bindings");
}
