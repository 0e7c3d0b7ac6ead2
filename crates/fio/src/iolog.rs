//! fio's I/O logs (`write_iolog`, `read_iolog`; fio 3.33 `iolog.c`): a trace of every I/O a job issued, and
//! its replay. fio 3.33 writes version 3 (`fio version 3 iolog`, each line led by the microseconds since the
//! job started: `T FILE add|open|close`, `T FILE read|write|trim|sync OFFSET LENGTH`) and reads versions 2 (no
//! times; `FILE wait USEC` delays) and 3 (the gaps between times are replayed unless `replay_no_stall`).

use super::options::FioError;

/// Version 2's and 3's first lines.
const VERSION_2: &str = "fio version 2 iolog";
const VERSION_3: &str = "fio version 3 iolog";

/// What a trace line asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceAction {
    Read,
    Write,
    /// On a zoned device, a trim is a zone reset: the whole zone.
    Trim,
    /// `sync` and `datasync`: a device flush.
    Sync,
}

impl TraceAction {
    pub fn name(self) -> &'static str {
        match self {
            TraceAction::Read => "read",
            TraceAction::Write => "write",
            TraceAction::Trim => "trim",
            TraceAction::Sync => "sync",
        }
    }
}

/// One I/O of a trace, with the device time to wait before issuing it (from version 3's times or version 2's
/// `wait` lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceOp {
    pub action: TraceAction,
    pub offset: u64,
    pub len: u64,
    pub delay_ns: u64,
}

/// Parses a trace. `origin` names it in errors; each I/O's offset and length must be whole blocks of
/// `block_bytes`. With `no_stall` (`replay_no_stall`), no delays are kept.
pub fn parse_iolog(origin: &str, text: &str, block_bytes: u64, no_stall: bool) -> Result<Vec<TraceOp>, FioError> {
    let at = |line: usize, why: String| FioError::Options(format!("read_iolog {origin}:{line}: {why}"));
    let mut lines = text.lines().enumerate().map(|(index, line)| (index + 1, line.trim()));
    let version = match lines.next().map(|(_, line)| line) {
        Some(VERSION_2) => 2,
        Some(VERSION_3) => 3,
        other => {
            return Err(at(
                1,
                format!("{:?} is not fio's iolog header ({VERSION_2:?} or {VERSION_3:?})", other.unwrap_or("")),
            ))
        }
    };
    let mut ops = Vec::new();
    let (mut pending_delay_ns, mut last_time_us) = (0u64, None::<u64>);
    for (number, line) in lines.filter(|(_, line)| !line.is_empty()) {
        let mut fields: Vec<&str> = line.split_whitespace().collect();
        if version == 3 {
            let time: u64 = fields
                .first()
                .and_then(|time| time.parse().ok())
                .ok_or_else(|| at(number, format!("{line:?} does not start with a time in microseconds")))?;
            // fio replays the gap since the previous line, and nothing when time goes backwards.
            if let Some(last) = last_time_us.filter(|&last| time > last && !no_stall) {
                pending_delay_ns += (time - last) * 1_000;
            }
            last_time_us = Some(time);
            fields.remove(0);
        }
        let number_at = |index: usize, what: &str| -> Result<u64, FioError> {
            fields
                .get(index)
                .and_then(|field| field.parse().ok())
                .ok_or_else(|| at(number, format!("{line:?} has no {what}")))
        };
        let action = match fields.get(1).copied() {
            Some("add" | "open" | "close") => continue,
            Some("wait") if version == 2 => {
                if !no_stall {
                    pending_delay_ns += number_at(2, "wait time")? * 1_000;
                }
                continue;
            }
            Some("read") => TraceAction::Read,
            Some("write") => TraceAction::Write,
            Some("trim") => TraceAction::Trim,
            Some("sync" | "datasync") => TraceAction::Sync,
            Some(other) => return Err(at(number, format!("bad iolog file action: {other}"))),
            None => return Err(at(number, format!("{line:?} names no action"))),
        };
        let (offset, len) = match action {
            TraceAction::Sync => (0, 0),
            _ => (number_at(2, "offset")?, number_at(3, "length")?),
        };
        if action != TraceAction::Sync && (offset % block_bytes != 0 || len % block_bytes != 0 || len == 0) {
            return Err(at(
                number,
                format!("{} at offset {offset} of {len} bytes is not whole {block_bytes}-byte blocks", action.name()),
            ));
        }
        ops.push(TraceOp { action, offset, len, delay_ns: std::mem::take(&mut pending_delay_ns) });
    }
    Ok(ops)
}

/// The trace a job writes (`write_iolog`), in version 3.
#[derive(Clone, Debug, PartialEq)]
pub struct IoTrace {
    pub path: String,
    pub file: String,
    lines: Vec<String>,
}

impl IoTrace {
    /// A trace of I/Os on `file`, opened at time 0.
    pub fn new(path: &str, file: &str) -> IoTrace {
        let mut trace = IoTrace { path: path.to_string(), file: file.to_string(), lines: Vec::new() };
        trace.lines.push(VERSION_3.to_string());
        trace.lines.push(format!("0 {file} add"));
        trace.lines.push(format!("0 {file} open"));
        trace
    }

    /// An I/O issued `time_ns` after the job started.
    pub fn record(&mut self, time_ns: u64, action: TraceAction, offset: u64, len: u64) {
        self.lines.push(format!("{} {} {} {offset} {len}", time_ns / 1_000, self.file, action.name()));
    }

    /// The trace's text, closed at `end_ns`.
    pub fn finish(&self, end_ns: u64) -> String {
        let mut text = self.lines.join("\n");
        text.push_str(&format!("\n{} {} close\n", end_ns / 1_000, self.file));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_parse_with_their_delays() {
        let v2 = "fio version 2 iolog\ndev add\ndev open\ndev write 0 4096\ndev wait 250 0\ndev read 0 4096\ndev sync 0 0\ndev close\n";
        let ops = parse_iolog("t", v2, 4096, false).expect("parses");
        assert_eq!(
            ops.iter().map(|op| (op.action, op.offset, op.len, op.delay_ns)).collect::<Vec<_>>(),
            [(TraceAction::Write, 0, 4096, 0), (TraceAction::Read, 0, 4096, 250_000), (TraceAction::Sync, 0, 0, 0)]
        );
        let v3 = "fio version 3 iolog\n32 dev add\n254 dev open\n259 dev read 0 16384\n651 dev read 32768 16384\n955 dev close\n";
        let ops = parse_iolog("t", v3, 4096, false).expect("parses");
        assert_eq!(ops[1].delay_ns, (651 - 259) * 1_000, "the gap between the two reads' times");
        assert_eq!(ops[0].delay_ns, (259 - 32) * 1_000, "the gap since the add");
        assert!(parse_iolog("t", v3, 4096, true).expect("parses").iter().all(|op| op.delay_ns == 0));
    }

    #[test]
    fn a_bad_trace_is_refused_with_its_line() {
        let error = |text: &str| parse_iolog("trace", text, 4096, false).expect_err(text).to_string();
        assert!(error("fio version 9 iolog\n").contains("trace:1"));
        assert!(
            error("fio version 2 iolog\ndev scribble 0 4096\n").contains("trace:2: bad iolog file action: scribble")
        );
        assert!(error("fio version 2 iolog\ndev write 100 4096\n").contains("not whole 4096-byte blocks"));
        assert!(error("fio version 3 iolog\nsoon dev read 0 4096\n").contains("time in microseconds"));
        assert!(error("fio version 2 iolog\ndev read 0\n").contains("has no length"));
    }

    #[test]
    fn a_written_trace_reads_back() {
        let mut trace = IoTrace::new("out.log", "preset:zn540");
        trace.record(1_500, TraceAction::Write, 0, 8192);
        trace.record(9_000, TraceAction::Read, 0, 8192);
        let text = trace.finish(12_000);
        assert!(text.starts_with(
            "fio version 3 iolog\n0 preset:zn540 add\n0 preset:zn540 open\n1 preset:zn540 write 0 8192\n"
        ));
        let ops = parse_iolog("out.log", &text, 4096, false).expect("parses");
        assert_eq!(ops.len(), 2);
        assert_eq!((ops[1].action, ops[1].delay_ns), (TraceAction::Read, 8_000));
    }
}
