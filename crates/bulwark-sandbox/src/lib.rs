//! Confinement: the capability-scoped workspace filesystem and sandboxed child processes.
#![forbid(unsafe_code)]
