//! Confinement: the capability-scoped workspace filesystem and sandboxed child
//! processes.
//!
//! Two halves, both built so that a tool handed one of these objects cannot
//! reach further than the object allows:
//!
//! * [`Workspace`]: every file operation an agent may cause is resolved
//!   *beneath* one directory handle (cap-std, `openat2(RESOLVE_BENEATH)` on
//!   Linux). String checks on the path run first as defense in depth, but the
//!   kernel-enforced handle is the real boundary, so a symlink, a symlinked
//!   parent, or a race between check and use cannot leave the root.
//! * [`run_process`]: children run with an empty environment, no stdin, their
//!   own process group and bounded output, and the whole group is killed on
//!   timeout so background grandchildren do not outlive the tool call.
//!
//! Landlock, seccomp, namespaces and rlimits are added by a later issue on top
//! of the same entry points.
#![forbid(unsafe_code)]

mod path;
mod process;
mod workspace;

pub use process::{ProcessOutput, ProcessSpec, SpawnError, minimal_env, run_process};
pub use workspace::{
    EDIT_MAX_BYTES, EntryInfo, EntryKind, FsError, SEARCH_MAX_FILE_BYTES, SearchHit, Workspace,
};
