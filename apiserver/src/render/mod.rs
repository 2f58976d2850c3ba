//! Rendering of API responses: list documents spliced from encoded objects ([`list`]), the
//! metadata-only forms ([`partial`]) and Table ([`table`]).

pub mod list;
pub mod partial;
pub mod table;
