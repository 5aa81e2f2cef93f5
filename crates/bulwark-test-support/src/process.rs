//! Child processes that are this test binary run again.

use std::process::Command;

/// The libtest name of the test `name` declared in the module at
/// `module_path` (pass `module_path!()`): the path without the crate, as
/// `--exact` matches it. Every crate's tests are one binary whose files are
/// modules, so a bare function name matches nothing.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

/// A command that runs this test binary again for the one test `name` of
/// the module at `module_path`, single-threaded, its output not captured:
/// how a test gets a separate process (one to contend on a file lock, or to
/// crash). Add `--ignored` for a child test that is ignored when run alone;
/// the caller adds the environment the child reads and starts it.
pub fn rerun_test(module_path: &str, name: &str) -> Command {
    let exe = std::env::current_exe().expect("the path of the running test binary");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        &test_name(module_path, name),
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

#[cfg(test)]
mod tests {
    use super::test_name;

    #[test]
    fn the_crate_is_dropped_from_the_module_path() {
        assert_eq!(test_name("all::ledger", "child"), "ledger::child");
        assert_eq!(test_name("all::a::b", "child"), "a::b::child");
        assert_eq!(test_name("all", "child"), "child");
    }
}
