//! A `$BULWARK_HOME` laid out on disk the way `bulwark` reads it: agents
//! with their manifests and model scripts. The kernel's, the server's and
//! the CLI's tests all build homes; the layout lives here once, so a change
//! to it (a new required file, a renamed directory) is made in one place.

use std::path::{Path, PathBuf};

/// Writes `contents` to `rel` under `root`, creating parent directories.
pub fn write_file(root: &Path, rel: &str, contents: &str) -> PathBuf {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
    }
    std::fs::write(&path, contents)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

/// Writes agent `name` under `root`: `agents/<name>/agent.toml` holding
/// `manifest`, and each `(file, contents)` of `files` beside it (a model
/// script, `SYSTEM.md`). Returns the agent's directory.
pub fn write_agent(root: &Path, name: &str, manifest: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join("agents").join(name);
    write_file(root, &format!("agents/{name}/agent.toml"), manifest);
    for (file, contents) in files {
        write_file(&dir, file, contents);
    }
    dir
}

/// `template` for agent `name`: every `NAME` replaced, so one manifest
/// template serves a family of agents (`[agent] name = "NAME"`).
pub fn for_agent(template: &str, name: &str) -> String {
    template.replace("NAME", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_is_written_where_bulwark_reads_it() {
        let root = std::env::temp_dir().join(format!("bw-test-support-{}", std::process::id()));
        let manifest = for_agent("[agent]\nname = \"NAME\"\n", "kid");
        let dir = write_agent(&root, "kid", &manifest, &[("s.jsonl", "{}\n")]);
        assert_eq!(dir, root.join("agents/kid"));
        assert_eq!(
            std::fs::read_to_string(dir.join("agent.toml")).unwrap(),
            "[agent]\nname = \"kid\"\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("s.jsonl")).unwrap(),
            "{}\n"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
