//! How guest RAM is backed on the host (`--backing`): a leaf, named by
//! the memory code and by its errors.
use serde::Serialize;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Backing {
    /// Anonymous memory, 4 KiB pages (THP off for this mapping).
    Anon,
    /// Anonymous memory with transparent huge pages requested.
    Thp,
    /// 2 MiB pages from the hugetlb pool (/proc/sys/vm/nr_hugepages).
    Hugetlb,
}

impl std::fmt::Display for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backing::Anon => "anon",
            Backing::Thp => "thp",
            Backing::Hugetlb => "hugetlb",
        })
    }
}
