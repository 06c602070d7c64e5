//! The wire's shapes, below both the domain and the HTTP layer: how an integer field of a JSON
//! body is read (exactly, or refused by name) and how a bounded field's schema is written in
//! the API description. The domain's types declare their fields with these; the HTTP layer
//! serves them.

pub(crate) mod integer;
pub(crate) mod schema;
