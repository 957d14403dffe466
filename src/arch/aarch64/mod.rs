//! aarch64: EL1 guest with the MMU on (being ported; see guest/aarch64/).
