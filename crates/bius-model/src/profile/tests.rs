//! Tests of loading profiles: the built-in ones keep their numbers, and a
//! profile written back reads back the same.

use super::*;

/// Sizes and bandwidths of the built-in profiles, as their TOML writes
/// them (KiB, MiB: 1024-based; MB/s: 1000-based).
#[test]
fn built_in_profiles_keep_their_sizes() {
    let ssd = Profile::built_in("nvme-ssd").unwrap();
    let flash = ssd.flash.as_ref().unwrap();
    assert_eq!(flash.program_unit, 32 << 10);
    assert_eq!(flash.write_buffer, 1 << 20);
    assert_eq!(flash.channel_bandwidth, 800_000_000);
    assert_eq!(ssd.ftl.as_ref().unwrap().block_size, 64 << 10);
    assert_eq!(ssd.host.read_bandwidth, 3_360_000_000);

    let zns = Profile::built_in("zns-ssd").unwrap();
    let zones = zns.zones.as_ref().unwrap();
    assert_eq!(zones.size, 64 << 20);
    assert_eq!(zones.capacity, 67 << 19); // 33.5MiB
    assert_eq!(zones.zone_buffer, 6 << 20);
    assert_eq!(zns.flash.as_ref().unwrap().program_unit, 96 << 10);

    let hdd = Profile::built_in("smr-hdd").unwrap();
    assert_eq!(hdd.zones.as_ref().unwrap().size, 256 << 20);
    assert_eq!(hdd.hdd.as_ref().unwrap().outer_rate, 233_000_000);

    let nvm = Profile::built_in("nvm").unwrap();
    assert_eq!(nvm.nvm.as_ref().unwrap().access_size, 4096);
    assert_eq!(nvm.host.write_bandwidth, 6_200_000_000);
}

#[test]
fn a_profile_written_back_reads_back_the_same() {
    for name in Profile::built_in_names() {
        let profile = Profile::built_in(name).unwrap();
        let text = profile.to_toml();
        assert_eq!(Profile::from_toml(&text, name).unwrap(), profile, "{text}");
    }
}

#[test]
fn a_bare_unit_letter_in_a_model_file_is_1024_based() {
    let mut zns = Profile::built_in("zns-ssd").unwrap();
    zns.set("zones.capacity", "\"16m\"").unwrap();
    zns.set("zones.size", "\"32M\"").unwrap();
    let zones = zns.zones.as_ref().unwrap();
    assert_eq!((zones.size, zones.capacity), (32 << 20, 16 << 20));
    assert!(zns.to_toml().contains("size = \"32M\""));
}
