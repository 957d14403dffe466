//! The guest library, built by `build.rs` from `guest/<arch>/`: the blob
//! images of both link configurations, the variant tables of every
//! architecture, the generated ABI header, and the host copies of the
//! routine objects (linked into this crate for the native baseline).
use hypclear_link::catalog::{Family, VariantDef};

/// The linked ELF of the vanilla link configuration.
pub static VANILLA_ELF: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob-vanilla.elf"));
/// The linked ELF of the memset link configuration (clear_page is memset).
pub static MEMSET_ELF: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob-memset.elf"));
/// The flat images (the arm64 Image format) linux-loader's PE loader takes.
#[cfg(target_arch = "aarch64")]
pub static VANILLA_BIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob-vanilla.bin"));
#[cfg(target_arch = "aarch64")]
pub static MEMSET_BIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob-memset.bin"));

/// `hypclear_abi.h`, generated from `hypclear-abi` (kernel blobs build
/// their entry against it).
pub static ABI_HEADER: &str = include_str!(concat!(env!("OUT_DIR"), "/include/hypclear_abi.h"));

/// The commit the blob was built from (`unknown` outside a git checkout).
pub const GIT_COMMIT: &str = env!("HYPCLEAR_GIT_COMMIT");

/// Routine variants of `guest/x86_64/lib`, from the alias list and each
/// routine's header (see `hypclear_link::catalog`).
pub const X86_64_VARIANTS: &[VariantDef] =
    include!(concat!(env!("OUT_DIR"), "/variants_x86_64.rs"));
/// Routine variants of `guest/aarch64/lib`.
pub const AARCH64_VARIANTS: &[VariantDef] =
    include!(concat!(env!("OUT_DIR"), "/variants_aarch64.rs"));

/// The host copies of the routines, by alias name.
pub mod host {
    include!(concat!(env!("OUT_DIR"), "/host_routines.rs"));
}
