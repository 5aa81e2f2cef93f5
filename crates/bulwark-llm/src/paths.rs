//! What a session may name where a tool takes a path, for one turn.
//!
//! The kernel knows the workspace and the session's grants; a driver that
//! constrains the model's output (the local driver's grammar) can use this
//! so the model can only *write* paths that exist and that it may touch.
//! Drivers that cannot constrain output ignore it. It is a hint for the
//! model, never a permission: the door still checks every call, so a path
//! a driver produces outside these choices is refused there as before.

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
    pub allowed: AllowedPaths,
}

/// What may be written in one path argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedPaths {
    /// Exactly these workspace-relative paths (`""` is the workspace root,
    /// offered to directory arguments). Never empty when given: an argument
    /// with nothing to offer is left out of the grammar's tools instead.
    Listed(Vec<String>),
    /// A relative path of plain segments: no scheme, no leading `/`, no
    /// `.` or `..` segment, no hidden (dot-led) segment. For write targets
    /// (which need not exist yet) and trees too large to list.
    Relative,
}
