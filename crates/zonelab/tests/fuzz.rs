//! Bounded fuzzing of everything that decodes outside input: namespace and preset TOML, preset overrides,
//! device specs, fio's command line, and an image's `config.toml` and zone journal with bytes flipped. Each
//! property only asks that the decoder answer (a value or an error) without panicking, and that an image it
//! accepts still runs commands. `PROPTEST_CASES` raises the bound (CI runs the default); a failure prints the
//! input and the seed that reproduce it.

use proptest::prelude::*;
use zonelab_device::{apply_override, DeviceBuilder, DeviceConfig, DeviceSpec};
use zonelab_fio::parse_invocation;
use zonelab_zns::{ByteSize, Image, NamespaceConfig, StoreKind, ZoneSendAction};

/// Values that have broken parsers before: empty, signs, non-finite, overflowing, wrong types, units.
const NASTY_VALUES: &[&str] = &[
    "",
    "zipf:1.2",
    "zipf:1e308",
    "pareto:0.5",
    "normal:0.001",
    "4k/50:8k",
    "4k/101",
    "0/50",
    "io",
    "always",
    "json,terse",
    "0",
    "1",
    "-1",
    "4096",
    "4k",
    "1z",
    "3z",
    "50%",
    "101%",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "99999999p",
    "18446744073709551616",
    "4294967296",
    "0x10",
    "true",
    "\"16MiB\"",
    "\"lots\"",
    "[1, 2]",
    "{ a = 1 }",
    "randrw",
    "zbd",
    "psync",
    "1ms",
    "1:2",
    "50:99.9",
    "mq-deadline",
    "\u{0}",
    "🦀",
];

const NAMESPACE_KEYS: &[&str] = &[
    "zones",
    "zone-size",
    "zone-cap",
    "lba-size",
    "max-open",
    "max-active",
    "zasl",
    "mdts",
    "auto-close",
    "close-empty-open-zone",
    "finish-checks-resources",
    "cross-zone-reads",
    "dulbe",
    "unknown-key",
];

const FIO_KEYS: &[&str] = &[
    "name",
    "bssplit",
    "random_distribution",
    "continue_on_error",
    "startdelay",
    "loops",
    "number_ios",
    "section",
    "eta",
    "eta-newline",
    "write_lat_log",
    "log_avg_msec",
    "job_max_open_zones",
    "ignore_zone_limits",
    "minimal",
    "cmdhelp",
    "filename",
    "rw",
    "rwmixread",
    "bs",
    "size",
    "offset",
    "offset_increment",
    "io_size",
    "iodepth",
    "numjobs",
    "ioengine",
    "direct",
    "zonemode",
    "max_open_zones",
    "zone_reset_threshold",
    "zone_reset_frequency",
    "rate_iops",
    "runtime",
    "time_based",
    "ramp_time",
    "percentile_list",
    "randseed",
    "stonewall",
    "zone_append",
    "scheduler",
    "zinc_tokens",
    "zinc_max_holds",
    "output-format",
    "prefill",
    "nonsense",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(NASTY_VALUES).prop_map(str::to_string),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => "[ -~]{0,12}",
    ]
}

fn namespace_toml() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::collection::vec((proptest::sample::select(NAMESPACE_KEYS), value()), 0..8)
            .prop_map(|pairs| pairs.iter().map(|(key, value)| format!("{key} = {value}\n")).collect()),
        1 => "[ -~\n]{0,80}",
    ]
}

fn fio_args() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(
        prop_oneof![
            4 => (proptest::sample::select(FIO_KEYS), value()).prop_map(|(key, value)| format!("--{key}={value}")),
            1 => proptest::sample::select(FIO_KEYS).prop_map(|key| format!("--{key}")),
            1 => "[ -~]{0,16}",
        ],
        0..10,
    )
}

/// A small image with some zones written and open, for corrupting.
fn fresh_image() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("img");
    let config = NamespaceConfig { zones: 8, zone_size: ByteSize(64 << 10), max_open: 3, ..NamespaceConfig::default() };
    let mut image = Image::create(&path, StoreKind::File, config, None, false).expect("create");
    image.namespace_mut().write(0, &[7u8; 8192]).expect("write zone 0");
    image.namespace_mut().write(16, &[8u8; 4096]).expect("write zone 1");
    image.namespace_mut().zone_management_send(32, ZoneSendAction::Open, false).expect("open zone 2");
    drop(image);
    (dir, path)
}

/// Runs a few commands on an image the decoders accepted: they may fail with a status, never panic.
fn exercise(image: &mut Image) {
    let ns = image.namespace_mut();
    let mut block = [0u8; 4096];
    for zone in 0..ns.geometry().zones {
        let start = ns.geometry().zone_start_lba(zone);
        let _ = ns.read(start, &mut block);
        let _ = ns.append(start, &block);
    }
    let _ = ns.zone_management_send(0, ZoneSendAction::Reset, true);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn namespace_toml_is_decoded_or_refused(text in namespace_toml()) {
        if let Ok(config) = NamespaceConfig::from_toml(&text) {
            let _ = config.validate();
        }
    }

    #[test]
    fn preset_documents_and_overrides_are_decoded_or_refused(
        text in namespace_toml(),
        overrides in proptest::collection::vec(
            (proptest::sample::select(&["namespace.zones", "namespace.zone-size", "media.nand.channels",
                "media.nand.read-latency-us", "media.controller", "name", "namespace", "a.b.c", ""][..]), value())
                .prop_map(|(key, value)| format!("{key}={value}")),
            0..4,
        ),
    ) {
        let _ = DeviceConfig::parse("fuzz", &format!("name = \"fuzz\"\n[namespace]\n{text}"), &overrides);
        let _ = DeviceConfig::load("zn540", &overrides);
        let mut document: toml::Table = toml::from_str("[a]\nb = 1\n").expect("valid");
        for assignment in &overrides {
            let _ = apply_override(&mut document, assignment);
        }
    }

    #[test]
    fn device_specs_build_or_are_refused(
        name in proptest::sample::select(&["preset:instant", "preset:zn540", "preset:nope", "preset:", "no/such/image"][..]),
        overrides in proptest::collection::vec(
            (proptest::sample::select(&["zones", "zone-size", "namespace.max-open", "store", "media.nand.channels", "x"][..]), value()),
            0..3,
        ),
    ) {
        let spec: String = overrides.iter().fold(name.to_string(), |spec, (key, value)| format!("{spec},{key}={value}"));
        let _ = DeviceBuilder::new(DeviceSpec::parse(&spec)).build();
    }

    #[test]
    fn fio_command_lines_are_parsed_or_refused(args in fio_args()) {
        let _ = parse_invocation(&args, |path| Err(format!("no job file {path} here")));
    }

    #[test]
    fn a_journal_with_bytes_flipped_opens_or_is_refused(
        flips in proptest::collection::vec((0usize..4096 + 64 * 8, 1u8..=255), 1..6),
    ) {
        let (_dir, path) = fresh_image();
        let journal = path.join("zones.meta");
        let mut bytes = std::fs::read(&journal).expect("read journal");
        for (at, mask) in flips {
            bytes[at] ^= mask;
        }
        std::fs::write(&journal, &bytes).expect("write journal");
        if let Ok(mut image) = Image::open(&path) {
            exercise(&mut image);
        }
    }

    #[test]
    fn an_image_configuration_edited_opens_or_is_refused(key in proptest::sample::select(NAMESPACE_KEYS), value in value()) {
        let (_dir, path) = fresh_image();
        let config = path.join("config.toml");
        let text = std::fs::read_to_string(&config).expect("read config");
        let edited: String = text
            .lines()
            .map(|line| if line.starts_with(&format!("{key} =")) { format!("{key} = {value}\n") } else { format!("{line}\n") })
            .collect();
        std::fs::write(&config, edited).expect("write config");
        if let Ok(mut image) = Image::open(&path) {
            exercise(&mut image);
        }
    }
}
