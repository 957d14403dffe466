//! THE calling convention: how one call of a routine becomes the
//! dispatcher's `fn(a0, a1, a2)` through an alias, in each link
//! configuration. The guest command ([`command`]) and the host baseline
//! (`bench::host`) both use [`lower`], so they cannot drift apart.
use super::catalog::alias_name;
use super::{Routine, VariantDef};
use crate::blob::{Blob, LinkConfig};
use crate::error::{Error, Result};
use crate::vmm::{Args, Command, Returns};
use hypclear_abi as abi;

/// One call: `routine(dst, src|fill, len)`, repeated `count` times over
/// consecutive (or, with a negative step, descending) chunks.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub routine: Routine,
    pub dst: u64,
    pub src: u64,
    pub fill: u8,
    /// Bytes per call (whole pages for page routines).
    pub len: u64,
    pub count: u64,
    /// Byte step between calls (usually `len`, negative for reverse order).
    pub step: i64,
}

/// A call lowered to the dispatcher's convention: call the routine behind
/// `alias` with `args` (see [`Args`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lowered {
    /// Alias-table name, e.g. `clear_pages_erms` or `memset_mops`.
    pub alias: String,
    pub args: Args,
    /// What the routine behind the alias returns (memset, memcpy: dst).
    pub returns: Returns,
}

/// Lower `call` with `variant` in link configuration `config`.
///
/// In the `memset` configuration `clear_page(addr)` is
/// `memset(addr, 0, PAGE_SIZE)` and `clear_pages(addr, n)` is
/// `memset(addr, 0, n * PAGE_SIZE)`; in `vanilla` clear_pages takes a page
/// count. Usage errors for lengths a routine cannot take.
pub fn lower(config: LinkConfig, variant: &VariantDef, call: &Call) -> Result<Lowered> {
    let alias = match (call.routine, config) {
        (Routine::ClearPages, LinkConfig::Vanilla) => alias_name("clear_pages", variant.name),
        (r, c) => alias_name(r.family(c).name(), variant.name),
    };
    if call.routine.page_granular() && !call.len.is_multiple_of(abi::PAGE_SIZE) {
        return Err(Error::NotWholePages {
            routine: call.routine,
            len: call.len,
            page: abi::PAGE_SIZE,
        });
    }
    if let Some(f) = call.routine.fixed_size()
        && call.len != f
    {
        return Err(Error::FixedSize {
            routine: call.routine,
            fixed: f,
            len: call.len,
        });
    }
    let step = call.step as u64;
    let mut a = Args {
        a0: call.dst,
        a0_step: step,
        a1: 0,
        a1_step: 0,
        a2: 0,
        count: call.count,
    };
    let mut returns = Returns::Nothing;
    match (call.routine, config) {
        (Routine::ClearPage, LinkConfig::Vanilla) => {}
        (Routine::ClearPages, LinkConfig::Vanilla) => a.a1 = call.len / abi::PAGE_SIZE,
        (Routine::ClearPage | Routine::ClearPages, LinkConfig::Memset) => {
            a.a2 = call.len;
            returns = Returns::Dst;
        }
        (Routine::Memset, _) => {
            a.a1 = u64::from(call.fill);
            a.a2 = call.len;
            returns = Returns::Dst;
        }
        (Routine::Memcpy, _) => {
            a.a1 = call.src;
            a.a1_step = step;
            a.a2 = call.len;
            returns = Returns::Dst;
        }
        (Routine::CopyPage, _) => {
            a.a1 = call.src;
            a.a1_step = step;
        }
    }
    Ok(Lowered {
        alias,
        args: a,
        returns,
    })
}

/// `clear_pages(addr, n)` where the blob has no clear_pages routine (a
/// kernel tree's x86 or arm64 vanilla objects): `n` calls of clear_page on
/// consecutive pages, as the generic clear_pages loop does. Only for
/// consecutive chunks (a step of one chunk).
pub(crate) fn lower_pages_as_page(variant: &VariantDef, call: &Call) -> Result<Lowered> {
    if call.count > 1 && call.step != call.len as i64 {
        return Err(Error::PagesNotConsecutive {
            step: call.step,
            len: call.len,
        });
    }
    let mut l = lower(
        LinkConfig::Vanilla,
        variant,
        &Call {
            routine: Routine::ClearPage,
            len: abi::PAGE_SIZE,
            count: 1,
            step: abi::PAGE_SIZE as i64,
            ..*call
        },
    )?;
    l.args.count = call.count * (call.len / abi::PAGE_SIZE);
    Ok(l)
}

/// The guest dispatcher command for `call` with `variant` in `blob`;
/// `call`'s buffers are guest-physical, the command's pointers the
/// guest-virtual addresses the guest reaches them at.
pub fn command(blob: &Blob, variant: &VariantDef, call: &Call) -> Result<Command> {
    let call = &Call {
        dst: crate::arch::guest_va(call.dst),
        src: crate::arch::guest_va(call.src),
        ..*call
    };
    let mut l = lower(blob.config, variant, call)?;
    if call.routine == Routine::ClearPages
        && blob.config == LinkConfig::Vanilla
        && blob.alias_index(&l.alias).is_none()
    {
        l = lower_pages_as_page(variant, call)?;
    }
    let index = blob.alias_index(&l.alias).ok_or_else(|| Error::NoAlias {
        config: blob.config,
        alias: l.alias.clone(),
    })?;
    Ok(Command {
        table: abi::TABLE_ALIAS,
        index,
        args: l.args,
        returns: l.returns,
    })
}
