//! Cells and tables in the one style every hypclear table uses.
use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};

/// A table with `header`, in hypclear's style.
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header(header.iter().map(Cell::new));
    t
}

/// A right-aligned cell (numbers).
pub fn right(v: impl ToString) -> Cell {
    Cell::new(v.to_string()).set_alignment(CellAlignment::Right)
}
