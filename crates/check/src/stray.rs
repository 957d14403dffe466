//! Stray writes anywhere in guest RAM. KVM's dirty-page log, read around
//! every call (or batch), names each page the guest wrote; a page outside
//! the windows of the checks that ran and the harness's own areas
//! (mailbox, stacks, page tables) is a stray write. It is then located to
//! the byte: the arena pages it hit are filled with a known pattern and the
//! same call runs again on its own.
use crate::arch;
use crate::checker::{self, Breakdown, Patterns, Placement};
use crate::error::Result;
use crate::record::{CheckRecord, Verdict};
use crate::vmm::Vm;
use hypclear_abi::PAGE_SIZE;

/// `[start, end)` ranges the guest may write during a call: the windows
/// (targets with their guards) of the checks that run, and the harness's.
fn allowed(windows: impl IntoIterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = windows.into_iter().collect();
    v.extend(arch::harness_areas(0));
    v
}

/// The pages of `dirty` no range of `allowed` touches.
pub(crate) fn outside(dirty: &[u64], allowed: &[(u64, u64)]) -> Vec<u64> {
    dirty
        .iter()
        .copied()
        .filter(|&page| {
            !allowed
                .iter()
                .any(|&(lo, hi)| lo < page + PAGE_SIZE && page < hi)
        })
        .collect()
}

/// Before a call that may write `allowed` (and the harness its areas):
/// every other page is watched.
pub(crate) fn watch(vm: &mut Vm, windows: impl IntoIterator<Item = (u64, u64)>) -> Result<()> {
    Ok(vm.watch_writes(&allowed(windows))?)
}

/// After it: the watched pages it wrote.
pub(crate) fn after(vm: &mut Vm) -> Result<Vec<u64>> {
    Ok(vm.writes_outside()?)
}

/// Runs of bytes `[gpa, gpa + len)` a call wrote into `pages`: the arena
/// pages among them (other pages hold code, tables or another area's data
/// and are named, not refilled) get the guard pattern, `rerun` runs the
/// call again, and whatever differs from the pattern is the stray write.
/// A byte written equal to the pattern's is invisible there (an inverted
/// fill byte can be a guard byte), so if nothing differs the pages get the
/// pattern's complement and the call runs once more: no byte equals both.
/// `keep` are ranges not to refill (the shared source area).
pub(crate) fn locate(
    vm: &mut Vm,
    pages: &[u64],
    keep: &[(u64, u64)],
    pats: &Patterns,
    rerun: &mut dyn FnMut(&mut Vm) -> Result<()>,
) -> Result<Vec<(u64, u64)>> {
    let refill: Vec<u64> = pages
        .iter()
        .copied()
        .filter(|&p| p >= arch::ARENA_BASE && outside(&[p], keep).len() == 1)
        .collect();
    let mut runs = Vec::new();
    for invert in [false, true] {
        if refill.is_empty() || !runs.is_empty() {
            break;
        }
        runs = differing(vm, &refill, pats, invert, rerun)?;
    }
    Ok(runs)
}

/// One rerun over `refill` filled with the guard pattern (its complement
/// with `invert`): the runs of bytes that differ from it afterwards.
fn differing(
    vm: &mut Vm,
    refill: &[u64],
    pats: &Patterns,
    invert: bool,
    rerun: &mut dyn FnMut(&mut Vm) -> Result<()>,
) -> Result<Vec<(u64, u64)>> {
    let fill = |buf: &mut [u8], p: u64| {
        checker::fill_pattern(buf, p, pats.guard);
        if invert {
            buf.iter_mut().for_each(|b| *b = !*b);
        }
    };
    let mut page = vec![0u8; PAGE_SIZE as usize];
    for &p in refill {
        fill(&mut page, p);
        vm.ram.write_bytes(p, &page)?;
    }
    rerun(vm)?;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut want = vec![0u8; PAGE_SIZE as usize];
    for &p in refill {
        fill(&mut want, p);
        vm.ram.read_into(p, &mut page)?;
        for (i, _) in page
            .iter()
            .zip(&want)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
        {
            let gpa = p + i as u64;
            match runs.last_mut() {
                Some((lo, len)) if *lo + *len == gpa => *len += 1,
                _ => runs.push((gpa, 1)),
            }
        }
    }
    Ok(runs)
}

/// Where `gpa` lies, said against the check at `p`.
fn whereabouts(gpa: u64, p: &Placement) -> String {
    let area = if gpa >= arch::ARENA_BASE {
        ""
    } else if (arch::BLOB_WINDOW..arch::BLOB_WINDOW_END).contains(&gpa) {
        ", in the blob window"
    } else {
        ", in the fixed areas below the blob (descriptors, page tables, mailboxes, stacks)"
    };
    let end = p.dst + p.len;
    if gpa >= end {
        format!("{} bytes past the target end{area}", gpa - end)
    } else {
        format!("{} bytes before the target{area}", p.dst - gpa)
    }
}

/// Fail `rec` (the check at `p`) for writing `pages` outside its window,
/// `runs` the bytes located (empty where none could be: pages outside
/// the arena, or a write the second run did not repeat).
pub(crate) fn judge(rec: &mut CheckRecord, p: &Placement, pages: &[u64], runs: &[(u64, u64)]) {
    let bytes: u64 = runs.iter().map(|r| r.1).sum();
    let what = match runs.first() {
        Some(&(gpa, len)) => {
            let more = if runs.len() > 1 {
                format!(" and {} more runs", runs.len() - 1)
            } else {
                String::new()
            };
            format!(
                "stray write: {len} bytes at {gpa:#x} ({}){more}",
                whereabouts(gpa, p)
            )
        }
        None => format!(
            "stray write into {} page(s) outside the check's window, first {:#x} ({})",
            pages.len(),
            pages[0],
            whereabouts(pages[0], p)
        ),
    };
    let first = runs.first().map_or(pages[0], |r| r.0);
    rec.verdict = Verdict::Fail;
    rec.breakdown = Breakdown {
        outside: rec.breakdown.outside + bytes.max(1),
        ..rec.breakdown
    };
    rec.bad_bytes = rec.breakdown.total();
    if !runs.is_empty() {
        rec.stray_bytes = Some(rec.stray_bytes.unwrap_or(0) + bytes);
    }
    rec.first_bad_offset = rec
        .first_bad_offset
        .or(Some(first.wrapping_sub(p.dst) as i64));
    rec.reason = Some(match rec.reason.take() {
        Some(r) => format!("{r}; {what}"),
        None => what,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_outside_every_range_are_strays() {
        let allowed = [(0x10_0010, 0x10_2000), (0x20_0000, 0x20_0001)];
        let dirty = [0x10_0000, 0x10_1000, 0x10_2000, 0x20_0000, 0x30_0000];
        assert_eq!(outside(&dirty, &allowed), [0x10_2000, 0x30_0000]);
    }

    #[test]
    fn a_stray_reads_against_its_check() {
        let p = Placement::new(arch::ARENA_BASE + 0x2000, 100, None, 0);
        let mut rec = crate::suite::tests::record_for_tests();
        judge(
            &mut rec,
            &p,
            &[arch::ARENA_BASE + 0x9000],
            &[(arch::ARENA_BASE + 0x9010, 1)],
        );
        assert_eq!(rec.verdict, Verdict::Fail);
        assert_eq!(rec.breakdown.outside, 1);
        let r = rec.reason.unwrap();
        assert!(r.starts_with("stray write: 1 bytes at "), "{r}");
        assert!(
            r.contains(&format!("({} bytes past the target end)", 0x7010 - 100)),
            "{r}"
        );
        let mut rec = crate::suite::tests::record_for_tests();
        judge(&mut rec, &p, &[arch::BLOB_WINDOW], &[]);
        let r = rec.reason.unwrap();
        assert!(r.contains("in the blob window"), "{r}");
        assert_eq!(rec.breakdown.outside, 1);
    }
}
