//! `biusctl create --zoned file PATH`: a [`ZonedFile`] (created at --size
//! if there is none), whose zone state file's geometry gives the zone
//! options omitted.

use std::path::Path;

use bius::size;
use bius_backends::{ZoneStateHeader, ZonedFile, ZonedFileError};

use super::{block_size, builder, framework_error, run, zone_geometry};
use crate::cli::{CreateArgs, ZoneArgs};
use crate::error::CliError;
use crate::values::{Bytes, PowerOfTwo};

/// The zoned file at `path`, its zone states in --zone-state if given.
pub(super) fn of(args: &CreateArgs, path: &Path) -> ZonedFile {
    let zoned = ZonedFile::new(path);
    match &args.zones.zone_state {
        Some(state) => zoned.zone_state(state),
        None => zoned,
    }
}

/// Creates the zoned device over `zoned`, announces its path and serves it
/// until a signal.
pub(super) fn serve(args: CreateArgs, zoned: &ZonedFile) -> Result<(), CliError> {
    let stored = zoned.stored().map_err(|err| error(0, err))?;
    let args = with_stored_geometry(args, stored);
    let size = disk_size(&args, zoned)?;
    let geometry = zone_geometry(&args, size)?;
    let disk = zoned
        .open(&geometry, block_size(&args))
        .map_err(|err| error(size, err))?;
    let (builder, model) = builder(&args, size)?;
    let device = builder
        .create_deferred(disk)
        .map_err(|err| framework_error(&args, size, err))?;
    run(device, &args, None, model)
}

/// `args` with the geometry of the zone state file (if there is one) for
/// the options omitted: size, block size, zone size, capacity and
/// conventional zones.  Options given must then match it, which
/// [`ZonedFile::open`] checks.
fn with_stored_geometry(args: CreateArgs, stored: Option<ZoneStateHeader>) -> CreateArgs {
    let Some(header) = stored else {
        return args;
    };
    CreateArgs {
        size: args.size.or(Some(Bytes(header.device_size))),
        block_size: args.block_size.or(Some(PowerOfTwo(header.block_size))),
        zones: ZoneArgs {
            zone_size: (args.zones.zone_size).or(Some(Bytes(header.zone_size))),
            zone_capacity: (args.zones.zone_capacity).or(Some(Bytes(header.zone_capacity))),
            conv_zones: (args.zones.conv_zones).or(Some(header.conventional_zones)),
            ..args.zones
        },
        ..args
    }
}

/// The disk's size: --size (or the zone state file's), else the whole
/// blocks of the file there.
fn disk_size(args: &CreateArgs, zoned: &ZonedFile) -> Result<u64, CliError> {
    if let Some(size) = args.size {
        return Ok(size.0);
    }
    let path = zoned.path();
    let Some(file_size) = zoned.data_size().map_err(|err| error(0, err))? else {
        return Err(CliError::Invalid {
            option: "--size",
            value: "none".into(),
            reason: format!(
                "{} does not exist: give its size to create it",
                path.display()
            ),
        });
    };
    let block_size = u64::from(block_size(args));
    match file_size / block_size * block_size {
        0 => Err(CliError::FileTooSmall(path.to_owned())),
        size => Ok(size),
    }
}

/// A zoned file's error, named by the option that can fix it (`size`: the
/// disk's size).
fn error(size: u64, err: ZonedFileError) -> CliError {
    match err {
        err @ ZonedFileError::NoZoneStateFile { .. } => CliError::Invalid {
            option: "--zone-state",
            value: "none".into(),
            reason: err.to_string(),
        },
        ZonedFileError::File { path, source } => CliError::OpenFile(path, source),
        ZonedFileError::TooSmall {
            path, size: file, ..
        } => CliError::Invalid {
            option: "--size",
            value: size::format(size),
            reason: format!("exceeds the size of {}, {file} bytes", path.display()),
        },
        ZonedFileError::ZoneState(err) => CliError::ZoneState(err),
    }
}

#[cfg(test)]
mod tests {
    use bius::zone::ZoneGeometry;
    use bius_backends::ZoneStateFile;

    use super::*;
    use crate::cli::create_args;

    #[test]
    fn a_new_file_needs_a_size_and_a_block_device_a_zone_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("zoned.img");
        let args = create_args(&["--zoned", "file", disk.to_str().unwrap()]);
        let err = disk_size(&args, &of(&args, &disk)).unwrap_err();
        assert!(err.to_string().starts_with("--size none: "), "{err}");
        let args = create_args(&["--zoned", "-s", "8M", "file", disk.to_str().unwrap()]);
        assert_eq!(disk_size(&args, &of(&args, &disk)).unwrap(), 8 << 20);
        std::fs::write(&disk, [0; 1000]).unwrap();
        let args = create_args(&["--zoned", "file", disk.to_str().unwrap()]);
        assert_eq!(disk_size(&args, &of(&args, &disk)).unwrap(), 512);
        let null = Path::new("/dev/null");
        let args = create_args(&["--zoned", "file", "/dev/null"]);
        let err = error(0, of(&args, null).stored().unwrap_err());
        assert!(err.to_string().starts_with("--zone-state none: "), "{err}");
    }

    #[test]
    fn options_omitted_come_from_the_zone_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("zoned.img");
        let state = dir.path().join("zoned.img.zones");
        let geometry = ZoneGeometry::new(8 << 20, 1 << 20)
            .unwrap()
            .with_zone_capacity(768 << 10)
            .unwrap()
            .with_conventional_zones(2)
            .unwrap();
        drop(ZoneStateFile::open(&state, &geometry, 4096).unwrap());
        let args = create_args(&["--zoned", "--max-open", "3", "file", disk.to_str().unwrap()]);
        let stored = of(&args, &disk).stored().unwrap();
        let args = with_stored_geometry(args, stored);
        assert_eq!(args.size, Some(Bytes(8 << 20)));
        assert_eq!(args.block_size, Some(PowerOfTwo(4096)));
        assert_eq!(args.zones.zone_size, Some(Bytes(1 << 20)));
        assert_eq!(args.zones.zone_capacity, Some(Bytes(768 << 10)));
        assert_eq!(args.zones.conv_zones, Some(2));
        assert_eq!(args.zones.max_open, Some(3));
        // Options given are kept (opening the zoned file then refuses them).
        let args = create_args(&["--zoned", "--conv-zones", "1", "file", "x"]);
        assert_eq!(with_stored_geometry(args, stored).zones.conv_zones, Some(1));
        // A malformed zone state file is an error with its errno.
        std::fs::write(
            &state,
            b"not a zone state file, but long enough to have a header",
        )
        .unwrap();
        let args = create_args(&["--zoned", "file", disk.to_str().unwrap()]);
        let err = error(0, of(&args, &disk).stored().unwrap_err());
        assert_eq!(err.errno(), bius::Errno::EINVAL);
        assert!(err.to_string().contains("zoned.img.zones"), "{err}");
    }

    #[test]
    fn a_file_smaller_than_the_size_names_the_option() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("zoned.img");
        std::fs::write(&disk, [0; 4096]).unwrap();
        let args = create_args(&[
            "--zoned",
            "-s",
            "8M",
            "--zone-size",
            "1M",
            "file",
            disk.to_str().unwrap(),
        ]);
        let geometry = zone_geometry(&args, 8 << 20).unwrap();
        let err = of(&args, &disk).open(&geometry, 512).err().unwrap();
        assert_eq!(
            error(8 << 20, err).to_string(),
            format!(
                "--size 8M: exceeds the size of {}, 4096 bytes",
                disk.display()
            )
        );
    }
}
