//! What a session may name where a tool takes a path, for one model call.
//!
//! The kernel knows the workspace and the session's grants; a driver that
//! constrains the model's output (the local driver's grammar) uses this so
//! the model can only *write* paths that exist and that it may touch.
//! Drivers that cannot constrain output ignore it. It is a hint for the
//! model, never a permission: the door still checks every call, so a path
//! a driver produces outside these choices is refused there as before.
//!
//! The contract, for a driver that honours it:
//!
//! - Only the arguments listed here are constrained; every other argument
//!   (and every tool without an entry) keeps the shape its schema gives.
//! - The choices never change which tools are *shown* to the model (the
//!   system prompt and tool schemas stay byte-identical from call to call,
//!   so a prompt-prefix cache stays valid): they only narrow what the model
//!   can write in one call.
//! - [`AllowedPaths::Listed`] with an empty list means nothing can be
//!   written there this call: if the argument is required, no call to that
//!   tool is possible (an empty workspace has nothing to read); if it is
//!   optional, it can only be left out. When no tool can be called at all,
//!   the turn can only answer in text, whatever the tool choice says.
//! - An optional directory argument may always be left out: leaving it out
//!   names the workspace root.

/// Per tool argument that names a path, what may be written there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathChoices {
    pub arguments: Vec<PathArgumentChoices>,
}

impl PathChoices {
    /// The choices for `tool`'s `argument`, if the kernel gave any.
    pub fn for_argument(&self, tool: &str, argument: &str) -> Option<&AllowedPaths> {
        self.arguments
            .iter()
            .find(|a| a.tool == tool && a.argument == argument)
            .map(|a| &a.allowed)
    }

    /// Every argument of `tool` that has choices.
    pub fn for_tool<'a>(
        &'a self,
        tool: &'a str,
    ) -> impl Iterator<Item = &'a PathArgumentChoices> + 'a {
        self.arguments.iter().filter(move |a| a.tool == tool)
    }

    /// The files listed for any file argument, sorted and without
    /// duplicates: what the workspace holds that the model may name, when
    /// the kernel could list it (empty when every file argument is
    /// [`AllowedPaths::Relative`]).
    pub fn listed_files(&self) -> Vec<&str> {
        let mut files: Vec<&str> = self
            .arguments
            .iter()
            .filter(|a| a.kind == PathKind::File)
            .filter_map(|a| match &a.allowed {
                AllowedPaths::Listed(paths) => Some(paths.iter().map(String::as_str)),
                AllowedPaths::Relative => None,
            })
            .flatten()
            .collect();
        files.sort_unstable();
        files.dedup();
        files
    }

    pub fn is_empty(&self) -> bool {
        self.arguments.is_empty()
    }
}

/// One tool argument (a top-level property of the tool's input object)
/// that names a workspace path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathArgumentChoices {
    pub tool: String,
    pub argument: String,
    /// What the argument names: a driver may describe the two differently
    /// (a workspace listing shows files), the grammar does not need it.
    pub kind: PathKind,
    /// The tool only reads what this argument names (`file_read`,
    /// `file_list`), never changes it. A driver that makes a call on the
    /// model's behalf (the local driver reads the files the user names)
    /// may only ever pick such a tool; `false` is the safe default.
    pub reads_only: bool,
    pub allowed: AllowedPaths,
}

/// Whether a path argument names a file or a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    File,
    Directory,
}

/// What may be written in one path argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedPaths {
    /// Exactly these workspace-relative paths, as the tool reads them
    /// (`""` is the workspace root, offered to directory arguments the
    /// grants let the model read). Empty: nothing may be written here this
    /// call (see the module doc: a required argument's tool cannot be
    /// called). A driver may fall back to [`AllowedPaths::Relative`] when
    /// the list is too large for it.
    Listed(Vec<String>),
    /// A relative path of plain segments: no scheme (`:`), no leading `/`,
    /// no `.` or `..` segment, no hidden (dot-led) segment, no backslash,
    /// no empty segment. For write targets (which need not exist yet) and
    /// trees too large to list.
    Relative,
}
