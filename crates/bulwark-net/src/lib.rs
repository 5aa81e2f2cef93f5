//! SafeHttp: the one outbound HTTP client agents can influence.
#![forbid(unsafe_code)]
