//! aarch64: EL1 guest with the MMU on (see the aarch64 issue).
