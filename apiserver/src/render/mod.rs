//! Rendering of API responses: list documents spliced from encoded objects ([`list`]) and
//! Table ([`table`]).

pub mod list;
pub mod table;
