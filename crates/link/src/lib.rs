//! The build-side pipeline, shared by the guest's build script and by
//! kernel blobs at run time: the variant catalogue read from the routine
//! files' headers ([`catalog`]), the link pipeline ([`link`]) and the
//! relocation policy, hypclear's gen-hyprel ([`hyprel`]). It takes text and
//! files, and depends on no other hypclear crate.
pub mod catalog;
pub mod hyprel;
pub mod link;
