//! `hypclear info`: host, KVM, CPU features, privilege and the blobs.
use super::Ctx;
use super::kernel::TreePicks;
use crate::arch;
use crate::blob::{Blob, TableRow};
use crate::error::Result;
use crate::kernel::Side;
use crate::vmm::host::HostInfo;
use crate::vmm::{self, Vm};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

/// One configuration's blob as loaded into a VM.
#[derive(Serialize)]
struct BlobInfo {
    load_address: u64,
    entry: u64,
    size: u64,
    relocations: usize,
    aliases: Vec<TableRow>,
    selftests: Vec<TableRow>,
}

/// Boot (without running) one VM per configuration to see each blob loaded.
fn blobs(ctx: &Ctx, host: &mut HostInfo) -> Result<BTreeMap<String, BlobInfo>> {
    let mut blobs = BTreeMap::new();
    for (i, side) in ctx.sides.iter().enumerate() {
        let config = side.config();
        let vm = Vm::new(vmm::open_kvm()?, &ctx.vm_options(side)?)?;
        if i == 0 {
            host.counter_khz = vm.counter_khz;
        }
        let blob: &Blob = &vm.blob;
        blobs.insert(
            config.name().to_string(),
            BlobInfo {
                load_address: vm.loaded.base,
                entry: vm.loaded.entry,
                size: blob.size,
                relocations: blob.relocs.len(),
                aliases: blob.aliases.clone(),
                selftests: blob.selftests.clone(),
            },
        );
    }
    Ok(blobs)
}

fn summary_table(
    ctx: &Ctx,
    kvm: &kvm_ioctls::Kvm,
    host: &HostInfo,
    blobs: &BTreeMap<String, BlobInfo>,
    picks: &[TreePicks],
) -> comfy_table::Table {
    let p = &ctx.privilege;
    let mut t = crate::table::table(&["item", "value"]);
    t.add_row(vec![
        "host".to_string(),
        format!("{} {} ({} CPUs)", host.arch, host.cpu_model, host.cpus),
    ]);
    t.add_row(vec!["kernel".to_string(), host.kernel.clone()]);
    t.add_row(vec![
        "KVM".to_string(),
        format!(
            "{}, {} (API {}, max vCPUs {})",
            host.kvm_flavour,
            host.kvm_paging,
            kvm.get_api_version(),
            kvm.get_max_vcpus()
        ),
    ]);
    t.add_row(vec![
        "guest CPUID features".to_string(),
        ctx.caps
            .features
            .iter()
            .map(|(n, v)| format!("{n}={}", if *v { "yes" } else { "no" }))
            .collect::<Vec<_>>()
            .join(" "),
    ]);
    for (k, v) in arch::cpu_details(kvm) {
        t.add_row(vec![k, v]);
    }
    pick_rows(&mut t, picks);
    t.add_row(vec![
        "counter".to_string(),
        format!("{} at {} kHz", host.counter, host.counter_khz),
    ]);
    t.add_row(vec![
        "privilege".to_string(),
        format!("{} ({}; {})", p.name, p.reason, p.source_text()),
    ]);
    t.add_row(vec!["seed".to_string(), ctx.seed.to_string()]);
    blob_rows(&mut t, ctx, blobs);
    t
}

/// "kernel 6.12.118 (linux-source-6.12) would run": each kernel side's
/// picks, read from its tree; with no tree, unknown (no table says it).
fn pick_rows(t: &mut comfy_table::Table, picks: &[TreePicks]) {
    if picks.is_empty() {
        t.add_row(vec![
            "kernel would run".to_string(),
            "unknown: no --kernel-tree (what a kernel runs is read from its tree's \
             alternatives: info --kernel-tree TREE)"
                .to_string(),
        ]);
    }
    for p in picks {
        t.add_row(vec![
            format!("kernel {} ({}) would run", p.kernel, p.side),
            crate::kernel::picks::picks_line(&p.picks),
        ]);
    }
}

/// The summary's rows about the blobs: a kernel blob's origin, link
/// configuration and alternatives, then where each blob was loaded.
fn blob_rows(t: &mut comfy_table::Table, ctx: &Ctx, blobs: &BTreeMap<String, BlobInfo>) {
    for e in ctx.sides.iter().filter_map(Side::external) {
        let r = &e.report;
        t.add_row(vec!["kernel blob".to_string(), e.label.clone()]);
        t.add_row(vec![
            "link configuration".to_string(),
            format!(
                "{} ({})",
                e.blob.config,
                r["link_reason"].as_str().unwrap_or("")
            ),
        ]);
        t.add_row(vec![
            format!(
                "alternatives ({})",
                r["alternatives"].as_str().unwrap_or("")
            ),
            e.paths.join("\n"),
        ]);
    }
    for (name, b) in blobs {
        t.add_row(vec![
            format!("{name} blob"),
            format!(
                "loaded at {:#x}, entry {:#x}, {} bytes, {} relocations",
                b.load_address, b.entry, b.size, b.relocations
            ),
        ]);
    }
}

fn alias_table(side: &Side) -> Result<comfy_table::Table> {
    let blob = side.blob()?;
    let mut a = crate::table::table(&["alias (__hypclear_)", "-> routine", "offset", "table"]);
    let rows = blob
        .aliases
        .iter()
        .map(|r| (r, "alias"))
        .chain(blob.selftests.iter().map(|r| (r, "selftest")));
    for (r, table) in rows {
        a.add_row(vec![
            r.name.clone(),
            r.target.clone(),
            format!("{:#x}", r.offset),
            table.into(),
        ]);
    }
    Ok(a)
}

/// The built-in variants: what each needs and which kernel code it follows
/// (from the guest sources' headers, see `routines::catalog`).
fn variant_table() -> comfy_table::Table {
    let mut t = crate::table::table(&[
        "family",
        "variant",
        "requires",
        "overlapping buffers",
        "follows (kernel code)",
    ]);
    for v in arch::VARIANTS {
        t.add_row(vec![
            v.family.name(),
            v.name,
            v.requires.unwrap_or("-"),
            overlap_note(v),
            v.kernel
                .unwrap_or("not kernel code (hypclear comparison point)"),
        ]);
    }
    t
}

/// What a copy routine promises for overlapping buffers, and so whether
/// the suite checks them.
fn overlap_note(v: &arch::VariantDef) -> &'static str {
    use arch::Family::{CopyPage, Memcpy};
    match (v.family, v.memmove) {
        (Memcpy, true) => "memmove: checked both ways",
        (Memcpy | CopyPage, false) => "no promise: not checked",
        _ => "-",
    }
}

pub(super) fn info(ctx: &Ctx) -> Result<i32> {
    let kvm = vmm::open_kvm()?;
    let mut host = HostInfo::collect(&ctx.caps, 0);
    let blobs = blobs(ctx, &mut host)?;
    let picks = super::kernel::kernel_picks(&ctx.sides, &ctx.caps)?;
    crate::outln!("{}", summary_table(ctx, &kvm, &host, &blobs, &picks));
    if ctx.sides.iter().all(|s| s.external().is_none()) {
        crate::outln!("built-in variants:\n{}", variant_table());
    }
    for side in &ctx.sides {
        crate::outln!("{} configuration:\n{}", side.config(), alias_table(side)?);
    }
    if let Some(path) = &ctx.common.json {
        let doc = json!({
            "tool": "hypclear",
            "command": "info",
            "host": host,
            "cpu": ctx.caps,
            "cpu_details": arch::cpu_details(&kvm),
            "variants": arch::VARIANTS.iter().map(|v| json!({
                "family": v.family, "name": v.name, "requires": v.requires, "kernel": v.kernel,
                "memmove": v.memmove,
            })).collect::<Vec<_>>(),
            "kernel": ctx.sides.iter().find_map(Side::external).map(|e| e.report.clone()),
            "kernel_picks": picks,
            "guest": { "privilege": ctx.privilege, "seed": ctx.seed, "blobs": blobs,
                       "load_address": blobs.values().next().map(|b| b.load_address) },
        });
        crate::files::write_json(path, &doc)?;
    }
    Ok(0)
}
