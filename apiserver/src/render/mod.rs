//! Rendering of API responses: Table ([`table`]).

pub mod table;
