//! `biusctl create --zoned file PATH`: the file (created at --size if
//! there is none) and its zone state file, whose geometry gives the zone
//! options omitted.

use std::path::{Path, PathBuf};

use bius::zone::ZoneRestoreError;
use bius_backends::{ZoneStateError, ZoneStateFile};

use crate::cli::{CreateArgs, ZoneArgs};
use crate::error::CliError;
use crate::values::{Bytes, PowerOfTwo};

/// Where the zone states of a zoned `path` live: `--zone-state`, or
/// `PATH.zones` next to a regular file.  A block device has no default: a
/// file next to its node would be on /dev, which a reboot empties.
fn zone_state_path(args: &CreateArgs, path: &Path) -> Result<PathBuf, CliError> {
    if let Some(state) = &args.zones.zone_state {
        return Ok(state.clone());
    }
    let is_file = std::fs::metadata(path).map_or(true, |meta| meta.is_file());
    if !is_file {
        return Err(CliError::Invalid {
            option: "--zone-state",
            value: "none".into(),
            reason: format!(
                "{} is not a regular file: name the zone state file (it must outlive a reboot)",
                path.display()
            ),
        });
    }
    let mut state = path.as_os_str().to_owned();
    state.push(".zones");
    Ok(state.into())
}

/// `args` with the geometry of the zone state file at `state` (if there is
/// one) for the options omitted: size, block size, zone size, capacity and
/// conventional zones.  Options given must then match it, which
/// [`ZoneStateFile::open`] checks.
fn with_stored_geometry(args: CreateArgs, state: &Path) -> Result<CreateArgs, CliError> {
    if std::fs::metadata(state).map_or(true, |meta| meta.len() == 0) {
        return Ok(args);
    }
    let header = ZoneStateFile::header(state).map_err(CliError::ZoneState)?;
    let geometry = header.geometry();
    Ok(CreateArgs {
        size: args.size.or(Some(Bytes(header.device_size))),
        block_size: args.block_size.or(Some(PowerOfTwo(header.block_size))),
        zones: ZoneArgs {
            zone_size: args
                .zones
                .zone_size
                .or(Some(Bytes(geometry.zone_sectors << 9))),
            zone_capacity: (args.zones.zone_capacity).or(Some(Bytes(geometry.zone_capacity << 9))),
            conv_zones: (args.zones.conv_zones).or(Some(geometry.conventional_zones)),
            ..args.zones
        },
        ..args
    })
}

/// The options of `--zoned file PATH` completed from its zone state file,
/// and that file's path; PATH is created at --size if missing.
pub(super) fn prepare(args: CreateArgs, path: &Path) -> Result<(CreateArgs, PathBuf), CliError> {
    let state = zone_state_path(&args, path)?;
    let args = with_stored_geometry(args, &state)?;
    create_missing(path, args.size.map(|size| size.0))?;
    Ok((args, state))
}

/// Creates the file at `path` with `size` bytes if there is none (a zoned
/// file starts empty).
fn create_missing(path: &Path, size: Option<u64>) -> Result<(), CliError> {
    if path.exists() {
        return Ok(());
    }
    let Some(size) = size else {
        return Err(CliError::Invalid {
            option: "--size",
            value: "none".into(),
            reason: format!(
                "{} does not exist: give its size to create it",
                path.display()
            ),
        });
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|err| CliError::OpenFile(path.to_owned(), err))?;
    file.set_len(size)
        .map_err(|err| CliError::OpenFile(path.to_owned(), err))
}

/// A zone state file's records that the zones refuse (which
/// [`ZoneStateFile::open`] has checked already).
pub(super) fn restore_error(path: &Path, err: ZoneRestoreError) -> CliError {
    CliError::ZoneState(ZoneStateError::Malformed {
        path: path.to_owned(),
        field: "records".into(),
        why: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use bius::zone::ZoneGeometry;

    use super::*;
    use crate::cli::create_args;

    #[test]
    fn a_regular_file_keeps_its_zones_next_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("zoned.img");
        let args = create_args(&["--zoned", "-s", "8M", "file", disk.to_str().unwrap()]);
        let (args, state) = prepare(args, &disk).unwrap();
        assert_eq!(state, dir.path().join("zoned.img.zones"));
        assert_eq!(std::fs::metadata(&disk).unwrap().len(), 8 << 20);
        assert_eq!(args.zones.zone_size, None);
        let named = dir.path().join("elsewhere");
        let args = create_args(&[
            "--zoned",
            "--zone-state",
            named.to_str().unwrap(),
            "file",
            disk.to_str().unwrap(),
        ]);
        assert_eq!(prepare(args, &disk).unwrap().1, named);
    }

    #[test]
    fn a_new_file_needs_a_size_and_a_block_device_a_zone_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("zoned.img");
        let args = create_args(&["--zoned", "file", disk.to_str().unwrap()]);
        let err = prepare(args, &disk).unwrap_err();
        assert!(err.to_string().starts_with("--size none: "), "{err}");
        assert!(!disk.exists());
        let args = create_args(&["--zoned", "file", "/dev/null"]);
        let err = prepare(args, Path::new("/dev/null")).unwrap_err();
        assert!(err.to_string().starts_with("--zone-state none: "), "{err}");
    }

    #[test]
    fn options_omitted_come_from_the_zone_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("zoned.img");
        let state = dir.path().join("zoned.img.zones");
        let geometry = ZoneGeometry {
            zone_capacity: 1536,
            conventional_zones: 2,
            ..ZoneGeometry::new(16384, 2048)
        };
        drop(ZoneStateFile::open(&state, &geometry, 4096).unwrap());
        let args = create_args(&["--zoned", "--max-open", "3", "file", disk.to_str().unwrap()]);
        let (args, _) = prepare(args, &disk).unwrap();
        assert_eq!(args.size, Some(Bytes(8 << 20)));
        assert_eq!(args.block_size, Some(PowerOfTwo(4096)));
        assert_eq!(args.zones.zone_size, Some(Bytes(1 << 20)));
        assert_eq!(args.zones.zone_capacity, Some(Bytes(768 << 10)));
        assert_eq!(args.zones.conv_zones, Some(2));
        assert_eq!(args.zones.max_open, Some(3));
        assert_eq!(std::fs::metadata(&disk).unwrap().len(), 8 << 20);
        // Options given are kept (the zone state file then refuses them).
        let args = create_args(&["--zoned", "--conv-zones", "1", "file", "x"]);
        assert_eq!(
            with_stored_geometry(args, &state).unwrap().zones.conv_zones,
            Some(1)
        );
        // A malformed zone state file is an error with its errno.
        std::fs::write(
            &state,
            b"not a zone state file, but long enough to have a header",
        )
        .unwrap();
        let args = create_args(&["--zoned", "file", "x"]);
        let err = with_stored_geometry(args, &state).unwrap_err();
        assert_eq!(err.errno(), bius::Errno::EINVAL);
        assert!(err.to_string().contains("zoned.img.zones"), "{err}");
    }
}
