//! The diagnostics of the framework and of biusctl on standard error, one
//! line each: `biusctl: warning: ...`, as the errors are.

use std::io::Write;

/// Logs warnings and errors, and with `-v` (`verbose` 1) information,
/// with `-vv` debugging too.
pub fn init(verbose: u8) {
    // (only a logger set before would make this fail)
    let _ = builder(verbose).try_init();
}

/// The logger of [`init`]; `RUST_LOG` plays no part.
fn builder(verbose: u8) -> env_logger::Builder {
    let level = match verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        _ => log::LevelFilter::Debug,
    };
    let mut builder = env_logger::Builder::new();
    builder.filter_level(level).format(|out, record| {
        let level = match record.level() {
            log::Level::Error => "error",
            log::Level::Warn => "warning",
            log::Level::Info => "info",
            log::Level::Debug => "debug",
            log::Level::Trace => "trace",
        };
        writeln!(out, "biusctl: {level}: {}", record.args())
    });
    builder
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use log::Log;

    use super::*;

    /// What a logger for `verbose` writes of one record of each level.
    fn logged(verbose: u8) -> String {
        #[derive(Clone, Default)]
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl io::Write for Shared {
            fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().write(bytes)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let out = Shared::default();
        let logger = builder(verbose)
            .target(env_logger::Target::Pipe(Box::new(out.clone())))
            .build();
        for level in [
            log::Level::Error,
            log::Level::Warn,
            log::Level::Info,
            log::Level::Debug,
            log::Level::Trace,
        ] {
            logger.log(
                &log::Record::builder()
                    .level(level)
                    .target("bius::worker")
                    .args(format_args!("{} {}", "a", "message"))
                    .build(),
            );
        }
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn lines_name_biusctl_and_the_level() {
        assert_eq!(
            logged(0),
            "biusctl: error: a message\nbiusctl: warning: a message\n"
        );
        assert_eq!(
            logged(1),
            "biusctl: error: a message\nbiusctl: warning: a message\nbiusctl: info: a message\n"
        );
        assert!(logged(2).ends_with("biusctl: debug: a message\n"));
        assert_eq!(logged(2), logged(9));
    }
}
