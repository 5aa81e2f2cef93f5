//! `bulwark init`: lay out `$BULWARK_HOME` with working examples.

use crate::Failure;
use anyhow::Context;
use bulwark_kernel::{Home, LOCAL_USER};
use std::path::Path;

const FILES: &[(&str, &str)] = &[
    ("config.toml", include_str!("../templates/config.toml")),
    (
        "agents/assistant/agent.toml",
        include_str!("../templates/assistant/agent.toml"),
    ),
    (
        "agents/assistant/SYSTEM.md",
        include_str!("../templates/assistant/SYSTEM.md"),
    ),
    (
        "agents/offline/agent.toml",
        include_str!("../templates/offline/agent.toml"),
    ),
    (
        "agents/offline/SYSTEM.md",
        include_str!("../templates/offline/SYSTEM.md"),
    ),
    (
        "agents/demo/agent.toml",
        include_str!("../templates/demo/agent.toml"),
    ),
    (
        "agents/demo/demo.jsonl",
        include_str!("../templates/demo/demo.jsonl"),
    ),
];
const SAMPLE_NOTES: &str = include_str!("../templates/notes.txt");

fn write_file(path: &Path, contents: &str, force: bool) -> anyhow::Result<bool> {
    if path.exists() && !force {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(true)
}

pub fn init(home: &Home, force: bool) -> Result<(), Failure> {
    let root = home.root();
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict {}", root.display()))?;
    }
    let mut written = Vec::new();
    let mut kept = Vec::new();
    for (rel, contents) in FILES {
        let path = root.join(rel);
        if write_file(&path, contents, force)? {
            written.push(*rel);
        } else {
            kept.push(*rel);
        }
    }
    if crate::cmd_audit::key_for_new_home(home)? {
        written.push("keys/audit.key");
    }
    for agent in ["assistant", "demo", "offline"] {
        let notes = home.workspace_dir(LOCAL_USER, agent)?.join("notes.txt");
        write_file(&notes, SAMPLE_NOTES, force)?;
    }
    println!("Bulwark home: {}", root.display());
    for rel in &written {
        println!("  wrote {rel}");
    }
    for rel in &kept {
        println!("  kept  {rel} (exists; --force overwrites)");
    }
    println!("\nNext:");
    println!(
        "  bulwark run demo \"show me\"          scripted walkthrough of the door, no model needed"
    );
    println!("  bulwark policy explain assistant    what the assistant may do");
    println!("  bulwark preflight assistant         check its model and keys");
    println!(
        "  bulwark model fetch                 the offline model ({}), then:",
        crate::cmd_model::default_model_summary()
    );
    println!("  bulwark run offline \"What is the launch code name in notes.txt?\"");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::FILES;

    /// The offline agent `init` installs runs the catalogue's default model,
    /// the one `bulwark model fetch` gets without a name.
    #[test]
    fn the_offline_template_names_the_default_model() {
        let (_, text) = FILES
            .iter()
            .find(|(path, _)| *path == "agents/offline/agent.toml")
            .unwrap();
        let line = format!("model = \"local:{}\"", bulwark_models::DEFAULT_MODEL);
        assert!(text.lines().any(|l| l == line), "{text}");
    }
}
