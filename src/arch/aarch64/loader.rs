//! aarch64 blob loader: linux-loader's PE loader takes the flat image (an
//! arm64 Image with its header) at a 2 MiB-aligned base.
use crate::arch::{BlobImage, RamAccess};
use crate::error::{Error, Result};

/// Copy the blob's flat image to guest-physical `base`.
pub fn load_image(ram: &impl RamAccess, image: &BlobImage, base: u64) -> Result<()> {
    use linux_loader::loader::{KernelLoader, pe::PE};
    let flat = image
        .flat
        .ok_or_else(|| Error::Load("no flat image for the PE loader".into()))?;
    let mut cursor = std::io::Cursor::new(flat);
    let r = PE::load(
        ram.mem(),
        Some(vm_memory::GuestAddress(base)),
        &mut cursor,
        None,
    )
    .map_err(|e| Error::Load(format!("linux-loader PE (arm64 Image) loader: {e}")))?;
    if r.kernel_load.0 != base {
        return Err(Error::Load(format!(
            "the Image header asked for a text offset: loaded at {:#x}, expected {base:#x}",
            r.kernel_load.0
        )));
    }
    Ok(())
}
