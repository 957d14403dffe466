//! Building and preparing a user's kernel tree's own library routines for
//! the blob: the tree ([`tree`]), kbuild ([`kbuild`]) and the kernel's
//! alternatives ([`alternatives`]).
pub mod alternatives;
pub mod kbuild;
pub mod tree;
