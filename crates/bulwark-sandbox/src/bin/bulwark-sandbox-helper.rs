//! Stand-alone sandbox helper: `bulwark-sandbox-helper __sandbox-exec`
//! behaves like `bulwark __sandbox-exec`. It lets this crate's tests and
//! benches run the real helper without the CLI.

fn main() {
    bulwark_sandbox::helper_main()
}
