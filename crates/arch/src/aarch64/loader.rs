//! aarch64 blob loader: linux-loader's PE loader takes the flat image (an
//! arm64 Image with its header) at a 2 MiB-aligned base.
use super::error::{Error, Result};
use crate::{BlobImage, RamAccess};

/// Copy the blob's flat image to guest-physical `base`.
pub fn load_image(ram: &impl RamAccess, image: &BlobImage, base: u64) -> Result<()> {
    use linux_loader::loader::{KernelLoader, pe::PE};
    let flat = image.flat.ok_or(Error::NoFlatImage)?;
    let mut cursor = std::io::Cursor::new(flat);
    let r = PE::load(
        ram.mem(),
        Some(vm_memory::GuestAddress(base)),
        &mut cursor,
        None,
    )
    .map_err(Error::PeLoader)?;
    if r.kernel_load.0 != base {
        return Err(Error::TextOffset {
            loaded: r.kernel_load.0,
            expected: base,
        });
    }
    Ok(())
}
