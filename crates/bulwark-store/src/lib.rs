//! Persistence: sessions, messages and the durable audit sink on SQLite.
#![forbid(unsafe_code)]
