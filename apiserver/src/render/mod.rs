//! Rendering of API responses: list documents spliced from encoded objects ([`list`]), the
//! metadata-only forms ([`partial`]), Table ([`table`]) and YAML ([`yaml`]).

pub mod list;
pub mod partial;
pub mod table;
pub mod yaml;
