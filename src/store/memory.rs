//! The in-process engine (the `memory` store). Placeholder until the timing wheel lands.

use crate::config::Settings;
use crate::error::{Error, Result};
use crate::store::SharedStore;

pub async fn open(_settings: &Settings) -> Result<SharedStore> {
    Err(Error::invalid(
        "store",
        "the memory engine is not built yet; use TOC_STORE=redis",
    ))
}
