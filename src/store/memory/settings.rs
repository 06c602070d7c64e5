//! `[memory]`: the memory engine's settings, which `crate::config` loads and layers.

use std::path::PathBuf;

use serde::Deserialize;

/// When the memory engine's journal reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// Before every answer (group commit: one fsync covers every change waiting).
    Always,
    /// Within a second: a crash may lose the last second.
    EverySecond,
}

/// The memory store's durability.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    /// The journal file. Empty (the default): `toc serve` keeps it at `DATA_DIR/journal`
    /// (a library's center: memory only); `none`: memory only, nothing survives a restart.
    pub journal: PathBuf,
    /// When journal writes reach the disk.
    pub fsync: FsyncPolicy,
}
