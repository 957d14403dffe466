//! x86_64 blob loader: linux-loader's ELF loader places the linked blob's
//! segments at the (randomized) base.
use super::error::{Error, Result};
use crate::{BlobImage, RamAccess};
use hypclear_abi as abi;

/// Copy the blob's loadable segments to guest-physical `base`.
pub fn load_image(ram: &impl RamAccess, image: &BlobImage, base: u64) -> Result<()> {
    use linux_loader::loader::{KernelLoader, elf::Elf};
    let mut cursor = std::io::Cursor::new(image.elf);
    let r = Elf::load(
        ram.mem(),
        Some(vm_memory::GuestAddress(base)),
        &mut cursor,
        None,
    )
    .map_err(Error::ElfLoader)?;
    if r.kernel_end > base + image.size.max(1) + abi::PAGE_SIZE {
        return Err(Error::BeyondSize {
            end: r.kernel_end,
            size: image.size,
        });
    }
    Ok(())
}
