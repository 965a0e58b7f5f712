//! What `list`, `info` and `zones` print: tables and `key: value` lines
//! for people, JSON (`--json`) for programs.  JSON field names are stable
//! snake_case; sizes are numbers of bytes (zone positions: 512-byte
//! sectors, as blkzone(8) shows them, converted from the zones' bytes
//! here).

use std::io::{self, Write};

use bius::zone::Zone;
use bius::{size, DeviceInfo};
use serde::Serialize;

use crate::model::ModelReport;
use crate::nvme::ExportReport;
use crate::values::{Transfer, SECTOR};

/// One device, as `info --json` prints it and `list --json` lists it:
/// biusctl's JSON schema, which scripts read, and so kept apart from the
/// library's [`DeviceInfo`] (whose fields follow the Rust API): plain
/// numbers in the units their names say (`timeout_ms`, `poll_us`), the
/// capabilities as a list of names, and what the kernel's record lacks
/// (the disk's path, the daemon's model).
#[derive(Debug, Serialize)]
pub struct DeviceReport {
    pub id: u32,
    /// The disk's name; null until the disk is added.
    pub disk: Option<String>,
    pub path: Option<String>,
    pub state: String,
    pub owner_pid: i32,
    pub size: u64,
    pub logical_block_size: u32,
    pub physical_block_size: u32,
    pub queues: u32,
    /// Of the queues, the last ones that serve polled I/O.
    pub poll_queues: u32,
    pub connected_queues: u32,
    pub queue_depth: u32,
    pub max_io: u32,
    pub timeout_ms: u128,
    /// How long the device waits for a new daemon when its daemon is
    /// lost (state `recovering`); null: it dies with its daemon.
    pub recover_timeout_ms: Option<u128>,
    pub features: Vec<&'static str>,
    /// As `--transfer` takes it; null for a mode biusctl does not know.
    pub transfer_mode: Option<String>,
    pub window_size: u64,
    pub poll_us: u128,
    pub mapped_requests: u64,
    pub segmented_requests: u64,
    /// Null for a conventional device.
    pub zoned: Option<ZonedReport>,
    /// The device model and its counts (`info` only, from the daemon's
    /// socket); null without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelReport>,
    /// The device's exports as NVMe namespaces (`info` only, from
    /// nvmet's configfs tree); left out without one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nvme: Vec<ExportReport>,
}

/// The zone geometry of a zoned device, in bytes; limits 0 = none.
#[derive(Debug, Serialize)]
pub struct ZonedReport {
    pub zone_size: u64,
    pub zone_capacity: u64,
    pub conv_zones: u32,
    pub max_open: u32,
    pub max_active: u32,
    /// 0 if the kernel emulates appends.
    pub max_append: u32,
    pub append_emulated: bool,
}

impl From<&DeviceInfo> for DeviceReport {
    fn from(info: &DeviceInfo) -> Self {
        let caps = info.capabilities;
        DeviceReport {
            id: info.id,
            disk: (!info.disk_name.is_empty()).then(|| info.disk_name.clone()),
            path: info.path().map(|path| path.display().to_string()),
            state: info.state.to_string(),
            owner_pid: info.owner_pid,
            size: info.size,
            logical_block_size: info.logical_block_size,
            physical_block_size: info.physical_block_size,
            queues: info.queues,
            poll_queues: info.poll_queues,
            connected_queues: info.connected_queues,
            queue_depth: info.queue_depth,
            max_io: info.max_io_size,
            timeout_ms: info.timeout.as_millis(),
            recover_timeout_ms: info.recover_timeout.map(|timeout| timeout.as_millis()),
            features: [
                (caps.write_cache, "write_cache"),
                (caps.fua, "fua"),
                (caps.discard, "discard"),
                (caps.write_zeroes, "write_zeroes"),
                (caps.read_only, "read_only"),
                (caps.rotational, "rotational"),
                (caps.no_data, "no_data"),
                (info.zoned.is_some(), "zoned"),
                (
                    info.zoned.is_some_and(|z| z.append_emulated),
                    "zone_append_emulated",
                ),
            ]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect(),
            transfer_mode: info.transfer_mode.map(|mode| Transfer(mode).to_string()),
            window_size: info.window_size,
            poll_us: info.poll_time.as_micros(),
            mapped_requests: info.mapped_requests,
            segmented_requests: info.segmented_requests,
            zoned: info.zoned.map(|z| ZonedReport {
                zone_size: z.zone_size,
                zone_capacity: z.zone_capacity,
                conv_zones: z.conventional_zones,
                max_open: z.max_open,
                max_active: z.max_active,
                max_append: z.max_append,
                append_emulated: z.append_emulated,
            }),
            model: None,
            nvme: Vec::new(),
        }
    }
}

/// Pretty JSON and a newline.
pub fn write_json(out: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// The table of `biusctl list`.
pub fn write_list(out: &mut impl Write, devices: &[DeviceReport]) -> io::Result<()> {
    let row = |out: &mut dyn Write, cells: [&str; 7]| {
        writeln!(
            out,
            "{:<4} {:<16} {:<10} {:>6} {:>8} {:>8} {:>7}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
        )
    };
    row(
        out,
        ["ID", "NAME", "STATE", "QUEUES", "SIZE", "PID", "RECOVER"],
    )?;
    for dev in devices {
        row(
            out,
            [
                &dev.id.to_string(),
                dev.disk.as_deref().unwrap_or("-"),
                &dev.state,
                &dev.queues.to_string(),
                &size::format(dev.size),
                &dev.owner_pid.to_string(),
                &recover_timeout(dev),
            ],
        )?;
    }
    Ok(())
}

/// The recovery timeout in seconds (`30s`, `0.5s`), or `-` for none.
fn recover_timeout(dev: &DeviceReport) -> String {
    dev.recover_timeout_ms.map_or("-".into(), |ms| {
        format!(
            "{}s",
            std::time::Duration::from_millis(ms as u64).as_secs_f64()
        )
    })
}

/// The `key: value` lines of `biusctl info`.
pub fn write_info(out: &mut impl Write, dev: &DeviceReport) -> io::Result<()> {
    let bytes = |value: u64| format!("{value} ({})", size::format(value));
    let limit = |value: u32| match value {
        0 => "none".to_string(),
        n => n.to_string(),
    };
    let or_dash = |text: Option<&str>| text.unwrap_or("-").to_string();
    let features = (!dev.features.is_empty()).then(|| dev.features.join(","));
    let lines = [
        ("id", dev.id.to_string()),
        ("disk", or_dash(dev.disk.as_deref())),
        ("path", or_dash(dev.path.as_deref())),
        ("state", dev.state.clone()),
        ("owner_pid", dev.owner_pid.to_string()),
        ("size", bytes(dev.size)),
        ("logical_block_size", dev.logical_block_size.to_string()),
        ("physical_block_size", dev.physical_block_size.to_string()),
        ("queues", dev.queues.to_string()),
        ("poll_queues", dev.poll_queues.to_string()),
        ("connected_queues", dev.connected_queues.to_string()),
        ("queue_depth", dev.queue_depth.to_string()),
        ("max_io", dev.max_io.to_string()),
        ("timeout_ms", dev.timeout_ms.to_string()),
        (
            "recover_timeout_ms",
            dev.recover_timeout_ms
                .map_or("none".into(), |ms| ms.to_string()),
        ),
        ("features", or_dash(features.as_deref())),
        (
            "transfer_mode",
            dev.transfer_mode.as_deref().unwrap_or("unknown").into(),
        ),
        ("window_size", dev.window_size.to_string()),
        ("poll_us", dev.poll_us.to_string()),
        ("mapped_requests", dev.mapped_requests.to_string()),
        ("segmented_requests", dev.segmented_requests.to_string()),
    ];
    let zoned = dev.zoned.as_ref().map(|z| {
        [
            ("zone_size", bytes(z.zone_size)),
            ("zone_capacity", bytes(z.zone_capacity)),
            ("conv_zones", z.conv_zones.to_string()),
            ("max_open", limit(z.max_open)),
            ("max_active", limit(z.max_active)),
            (
                "max_append",
                match z.append_emulated {
                    true => "emulated by the kernel".into(),
                    false => bytes(z.max_append.into()),
                },
            ),
        ]
    });
    let model = dev.model.as_ref().map(crate::model::info_lines);
    let nvme = dev
        .nvme
        .iter()
        .map(|export| ("nvme_export", nvme_line(export)));
    lines
        .iter()
        .cloned()
        .chain(zoned.into_iter().flatten())
        .chain(model.into_iter().flatten())
        .chain(nvme)
        .try_for_each(|(key, value)| writeln!(out, "{key}: {value}"))
}

/// An NVMe export in one line: `NQN over TRANSPORT [ADDRESS]:
/// BLOCK CHAR` (`-` for what the host does not show).
fn nvme_line(export: &ExportReport) -> String {
    let or_dash = |text: &Option<String>| text.clone().unwrap_or_else(|| "-".into());
    let over = match &export.address {
        Some(address) => format!("{} {address}", export.transport),
        None => export.transport.clone(),
    };
    format!(
        "{} over {over}: {} {}",
        export.nqn,
        or_dash(&export.block),
        or_dash(&export.char)
    )
}

/// One zone as `zones --json` prints it, in sectors; `wp` absolute, or
/// null where the zone has no write pointer.
#[derive(Debug, Serialize)]
pub struct ZoneReport {
    pub zone: usize,
    pub start: u64,
    pub len: u64,
    pub capacity: u64,
    pub wp: Option<u64>,
    #[serde(rename = "type")]
    pub zone_type: String,
    pub cond: String,
}

/// The zones of a disk, numbered from 0, in sectors.
pub fn zone_reports(zones: &[Zone]) -> Vec<ZoneReport> {
    let sectors = |bytes: u64| bytes / SECTOR;
    zones
        .iter()
        .enumerate()
        .map(|(index, zone)| ZoneReport {
            zone: index,
            start: sectors(zone.start),
            len: sectors(zone.len),
            capacity: sectors(zone.capacity),
            wp: zone
                .condition
                .has_write_pointer()
                .then_some(sectors(zone.write_pointer)),
            // (blkzone's names, as the rest of the line)
            zone_type: zone.zone_type.kernel_name().into(),
            cond: zone.condition.kernel_name().into(),
        })
        .collect()
}

/// The zones as a table; WP relative to the zone start.
pub fn write_zones(out: &mut impl Write, zones: &[ZoneReport]) -> io::Result<()> {
    let row = |out: &mut dyn Write, cells: [&str; 7]| {
        writeln!(
            out,
            "{:>6} {:>12} {:>10} {:>10} {:>10}  {:<19} {}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
        )
    };
    row(out, ["ZONE", "START", "LEN", "CAP", "WP", "TYPE", "COND"])?;
    for zone in zones {
        let write_pointer = zone.wp.map_or_else(
            || "-".into(),
            |wp| wp.saturating_sub(zone.start).to_string(),
        );
        row(
            out,
            [
                &zone.zone.to_string(),
                &zone.start.to_string(),
                &zone.len.to_string(),
                &zone.capacity.to_string(),
                &write_pointer,
                &zone.zone_type,
                &zone.cond,
            ],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bius::zone::{ZoneCondition, ZoneType};
    use bius::{Capabilities, DeviceState, TransferMode, ZonedParams};
    use serde_json::json;

    use super::*;

    /// In sectors, the zones of bytes.
    fn zones() -> Vec<Zone> {
        let zone = |start: u64, zone_type, condition, write_pointer: u64| Zone {
            start: start * SECTOR,
            len: 131072 * SECTOR,
            capacity: 131072 * SECTOR,
            write_pointer: write_pointer.saturating_mul(SECTOR),
            zone_type,
            condition,
        };
        vec![
            zone(
                0,
                ZoneType::Conventional,
                ZoneCondition::NotWritePointer,
                131072,
            ),
            zone(
                131072,
                ZoneType::SequentialWriteRequired,
                ZoneCondition::ImplicitOpen,
                131080,
            ),
            zone(
                262144,
                ZoneType::SequentialWriteRequired,
                ZoneCondition::Offline,
                u64::MAX,
            ),
        ]
    }

    fn text(write: impl Fn(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn json_of(value: &impl Serialize) -> serde_json::Value {
        serde_json::from_str(&text(|out| write_json(out, value))).unwrap()
    }

    #[test]
    fn zone_table() {
        let table = text(|out| write_zones(out, &zone_reports(&zones())));
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines,
            [
                "  ZONE        START        LEN        CAP         WP  TYPE                COND",
                "     0            0     131072     131072          -  CONVENTIONAL        NOT_WP",
                "     1       131072     131072     131072          8  SEQ_WRITE_REQUIRED  IMP_OPEN",
                "     2       262144     131072     131072          -  SEQ_WRITE_REQUIRED  OFFLINE",
            ]
        );
    }

    #[test]
    fn zone_json() {
        assert_eq!(
            json_of(&zone_reports(&zones())),
            json!([
                {"zone": 0, "start": 0, "len": 131072, "capacity": 131072, "wp": null, "type": "CONVENTIONAL", "cond": "NOT_WP"},
                {"zone": 1, "start": 131072, "len": 131072, "capacity": 131072, "wp": 131080, "type": "SEQ_WRITE_REQUIRED", "cond": "IMP_OPEN"},
                {"zone": 2, "start": 262144, "len": 131072, "capacity": 131072, "wp": null, "type": "SEQ_WRITE_REQUIRED", "cond": "OFFLINE"}
            ])
        );
        assert_eq!(text(|out| write_json(out, &zone_reports(&[]))), "[]\n");
    }

    fn device(zoned: bool) -> DeviceInfo {
        DeviceInfo {
            id: 3,
            state: DeviceState::Live,
            connected_queues: 2,
            owner_pid: 42,
            disk_name: "data0".into(),
            size: 4 << 30,
            logical_block_size: 512,
            physical_block_size: 4096,
            queues: 2,
            poll_queues: 1,
            queue_depth: 128,
            max_io_size: 1 << 20,
            timeout: Duration::from_secs(30),
            capabilities: Capabilities {
                discard: true,
                write_zeroes: true,
                ..Capabilities::default()
            },
            transfer_mode: Some(TransferMode::Selective {
                threshold: 128 << 10,
            }),
            window_size: 8 << 20,
            poll_time: Duration::from_micros(200),
            mapped_requests: 7,
            segmented_requests: 1,
            zoned: zoned.then_some(ZonedParams {
                zone_size: 64 << 20,
                zone_capacity: 48 << 20,
                conventional_zones: 1,
                max_open: 0,
                max_active: 6,
                max_append: 1 << 20,
                append_emulated: false,
            }),
            recover_timeout: zoned.then_some(Duration::from_millis(2500)),
        }
    }

    #[test]
    fn device_json() {
        assert_eq!(
            json_of(&DeviceReport::from(&device(false))),
            json!({
                "id": 3, "disk": "data0", "path": "/dev/data0", "state": "live",
                "owner_pid": 42, "size": 4294967296u64, "logical_block_size": 512,
                "physical_block_size": 4096, "queues": 2, "poll_queues": 1,
                "connected_queues": 2,
                "queue_depth": 128, "max_io": 1048576, "timeout_ms": 30000,
                "recover_timeout_ms": null, "features": ["discard", "write_zeroes"], "transfer_mode": "selective=128K",
                "window_size": 8388608, "poll_us": 200, "mapped_requests": 7,
                "segmented_requests": 1, "zoned": null
            })
        );
        let zoned = json_of(&DeviceReport::from(&device(true)));
        assert_eq!(
            zoned["zoned"],
            json!({"zone_size": 67108864, "zone_capacity": 50331648, "conv_zones": 1,
                   "max_open": 0, "max_active": 6, "max_append": 1048576,
                   "append_emulated": false})
        );
        assert_eq!(zoned["recover_timeout_ms"], json!(2500));
        assert_eq!(
            zoned["features"],
            json!(["discard", "write_zeroes", "zoned"])
        );
        let mut unnamed = device(false);
        unnamed.disk_name.clear();
        let report = json_of(&[DeviceReport::from(&unnamed)]);
        assert_eq!(
            (&report[0]["disk"], &report[0]["path"]),
            (&json!(null), &json!(null))
        );
    }

    #[test]
    fn device_text() {
        let mut recovering = device(true);
        recovering.state = DeviceState::Recovering;
        let list = text(|out| {
            write_list(
                out,
                &[
                    DeviceReport::from(&device(false)),
                    DeviceReport::from(&recovering),
                ],
            )
        });
        assert_eq!(
            list,
            "ID   NAME             STATE      QUEUES     SIZE      PID RECOVER\n\
             3    data0            live            2       4G       42       -\n\
             3    data0            recovering      2       4G       42    2.5s\n"
        );
        let info = text(|out| write_info(out, &DeviceReport::from(&device(true))));
        for line in [
            "disk: data0",
            "size: 4294967296 (4G)",
            "features: discard,write_zeroes,zoned",
            "transfer_mode: selective=128K",
            "max_open: none",
            "max_active: 6",
            "recover_timeout_ms: 2500",
            "zone_capacity: 50331648 (48M)",
        ] {
            assert!(info.lines().any(|l| l == line), "{line} not in\n{info}");
        }
    }
}
