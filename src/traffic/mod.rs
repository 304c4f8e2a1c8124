//! What request records say as a whole, whoever reads them (a diagnosis, a postmortem): gateway
//! records joined to engine spans, the slowest requests and what they share, one upstream
//! against the others.

pub mod join;
pub mod slowest;
pub mod upstreams;
