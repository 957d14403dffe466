//! What a check left behind: its record (the JSON's `checks`), and the
//! records summed up into the rows of the verification table and KTAP.
//! The suite produces them; the stray-write search, reports and bench read
//! them.
use crate::blob::LinkConfig;
use crate::checker::Breakdown;
use crate::routines::Routine;
use crate::vmm::Breach;
use serde::Serialize;

/// Where an edge check puts a buffer against the page the host left
/// unmapped (`arch::edge_hole`), so that an access past it faults as it
/// would in the hyp's sparse mappings (the rest of the arena is one big
/// mapping, where an over-read never faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Edge {
    /// The target ends where the hole begins.
    TargetEnd,
    /// The source ends where the hole begins.
    SourceEnd,
    /// The source starts right above the hole.
    SourceStart,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Skipped,
}

/// One check in the report and the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRecord {
    pub config: LinkConfig,
    pub routine: Routine,
    pub variant: String,
    pub size: u64,
    pub count: u64,
    pub dst_offset: u64,
    pub src_offset: Option<u64>,
    /// The byte the target must hold: 0 for clear_page/clear_pages, the
    /// fill byte for memset; none for copies.
    pub fill: Option<u8>,
    /// An overlapping copy (memmove): the source at `dst + overlap`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<i64>,
    pub verdict: Verdict,
    pub first_bad_offset: Option<i64>,
    pub bad_bytes: u64,
    pub breakdown: Breakdown,
    /// The call broke the calling contract (a callee-saved register, the
    /// stack pointer, a flag or the return value); its calls after that
    /// one did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contract: Option<Breach>,
    /// An edge check: which buffer lay against the unmapped page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<Edge>,
    /// Guest counter ticks for the call(s).
    pub ticks: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes outside its window the stray-write log located exactly (none
    /// when it found no stray page, or only pages): what a verdict on a
    /// stray write is decided on; `reason` says it for people.
    #[serde(skip)]
    pub stray_bytes: Option<u64>,
    /// An edge check's fault: how far past (or before) the buffer at the
    /// hole the access got, at least; what a verdict on an edge fault is
    /// decided on.
    #[serde(skip)]
    pub fault_distance: Option<u64>,
}

/// One row of the verification table and one KTAP leaf: the checks of a
/// variant in a link configuration with one fill byte.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowKey {
    pub config: LinkConfig,
    pub routine: Routine,
    pub variant: String,
    pub fill: Option<u8>,
    /// Overlapping copies (memmove).
    pub overlap: bool,
}

impl RowKey {
    /// "erms", "erms fill 0x00" or "generic overlap": the variant as
    /// tables and KTAP name it.
    pub fn label(&self) -> String {
        match self.fill {
            _ if self.overlap => format!("{} overlap", self.variant),
            Some(f) if self.routine == Routine::Memset => format!("{} fill {f:#04x}", self.variant),
            _ => self.variant.clone(),
        }
    }
}

/// The checks of one row summed up.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    pub checks: u64,
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    pub bytes: u64,
    pub ticks: u64,
    pub min_size: Option<u64>,
    pub max_size: u64,
    pub first_failure: Option<String>,
    pub skip_reason: Option<String>,
}

/// Every check counted per row, in table order.
#[derive(Debug, Default, Clone)]
pub struct Rows(pub std::collections::BTreeMap<RowKey, Totals>);

impl Rows {
    pub fn of(records: &[CheckRecord]) -> Rows {
        let mut rows = Rows::default();
        for r in records {
            rows.add(r);
        }
        rows
    }

    pub fn add(&mut self, r: &CheckRecord) {
        let key = RowKey {
            config: r.config,
            routine: r.routine,
            variant: r.variant.clone(),
            fill: r.fill,
            overlap: r.overlap.is_some(),
        };
        let t = self.0.entry(key).or_default();
        t.checks += 1;
        match r.verdict {
            Verdict::Pass => t.passed += 1,
            Verdict::Fail => {
                t.failed += 1;
                if t.first_failure.is_none() {
                    t.first_failure = Some(format!(
                        "size {} dst+{}{}: {}",
                        r.size * r.count,
                        r.dst_offset,
                        r.src_offset
                            .map(|s| format!(" src+{s}"))
                            .unwrap_or_default(),
                        r.reason.clone().unwrap_or_default()
                    ));
                }
            }
            Verdict::Skipped => {
                t.skipped += 1;
                t.skip_reason = r.reason.clone();
            }
        }
        if r.verdict != Verdict::Skipped {
            let s = r.size * r.count;
            t.bytes += s;
            t.ticks += r.ticks;
            t.min_size = Some(t.min_size.map_or(s, |m| m.min(s)));
            t.max_size = t.max_size.max(s);
        }
    }

    /// Take in another VM's rows.
    pub fn merge(&mut self, other: Rows) {
        for (k, t) in other.0 {
            let x = self.0.entry(k).or_default();
            x.checks += t.checks;
            x.passed += t.passed;
            x.failed += t.failed;
            x.skipped += t.skipped;
            x.bytes += t.bytes;
            x.ticks += t.ticks;
            x.min_size = match (x.min_size, t.min_size) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            x.max_size = x.max_size.max(t.max_size);
            x.first_failure = x.first_failure.take().or(t.first_failure);
            x.skip_reason = x.skip_reason.take().or(t.skip_reason);
        }
    }

    /// Checks with each verdict: (passed, failed, skipped).
    pub fn counts(&self) -> (u64, u64, u64) {
        self.0.values().fold((0, 0, 0), |(p, f, s), t| {
            (p + t.passed, f + t.failed, s + t.skipped)
        })
    }
}
