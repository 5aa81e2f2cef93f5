//! Which workspace paths the model may name in one call, for a driver that
//! constrains its output ([`bulwark_llm::PathChoices`]).
//!
//! Before every model call (a turn's calls can create and delete files) the
//! kernel walks the workspace, bounded, and keeps for each path argument of
//! each offered tool ([`crate::tool::Tool::path_params`]) exactly the paths
//! the door would let through: each is checked with
//! [`EffectivePolicy::check_demand`] on the demand the tool would make
//! ([`Demand::FileRead`], [`Demand::FileWrite`], or both for an edit), the
//! door's own check. So the grammar can never offer what the door would
//! refuse; and the door is unchanged, so a driver without a grammar (a
//! script, a remote API) is still refused whatever it sends.
//!
//! What is offered:
//! - a file argument that reads: the existing regular files the grants let
//!   the model read (and write, for [`PathAccess::ReadWrite`]);
//! - a directory argument: the existing directories the grants let it
//!   read, with the root as `""` when the root is readable (an optional
//!   one may also be left out, which names the root, so a grammar cannot
//!   keep a model from listing a root the grants do not cover: the door
//!   refuses that call);
//! - a write target: [`AllowedPaths::Relative`] (it need not exist), or
//!   nothing at all when no `file_write` capability exists;
//! - [`AllowedPaths::Relative`] for reading arguments too when the walk hit
//!   a bound (a partial list would hide files that exist), unless no
//!   `file_read` capability exists (then nothing).
//!
//! The walk never follows a symlink and does not offer one: the door
//! checks a link where it leads, which a listing cannot show cheaply, and
//! a link can point anywhere. Hidden (dot-led) entries are neither offered
//! nor descended into: `.git` and friends would crowd out the files a
//! question is about, and the relative-path fallback excludes them too.
//! Both stay readable through the door where granted; they are only not
//! suggested. Names that are not UTF-8 or that the door would not parse as
//! one path component (control characters, backslashes) are skipped too.

use crate::registry::ToolRegistry;
use crate::session::Session;
use crate::tool::PathAccess;
use bulwark_llm::{AllowedPaths, PathArgumentChoices, PathChoices, PathKind, ToolDef};
use bulwark_policy::{Capability, Demand, EffectivePolicy, WorkspacePath};
use bulwark_sandbox::{EntryKind, Workspace};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How far one walk of the workspace may go before it gives up on listing
/// (reading arguments fall back to [`AllowedPaths::Relative`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkBounds {
    /// Entries looked at (files, directories and skipped ones).
    pub max_entries: usize,
    /// Directory levels below the root.
    pub max_depth: usize,
    /// Wall-clock time for the whole walk.
    pub max_time: Duration,
}

impl Default for WalkBounds {
    /// 2,000 entries: a listing the grammar can hold (a few tens of KB of
    /// rules) and a walk of a few milliseconds; a project tree larger than
    /// that gets the relative-path pattern. 16 levels cover real layouts.
    /// 50 ms caps a slow or huge directory (a network mount) at a small
    /// fraction of a model call.
    fn default() -> Self {
        Self {
            max_entries: 2_000,
            max_depth: 16,
            max_time: Duration::from_millis(50),
        }
    }
}

/// What one walk found: the offerable files and directories (root
/// excluded), sorted, and whether the walk saw the whole tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceTree {
    pub files: Vec<WorkspacePath>,
    pub dirs: Vec<WorkspacePath>,
    pub complete: bool,
}

/// Walks `workspace` breadth-first within `bounds`, through its handle
/// (never by ambient path), without following symlinks.
pub fn walk(workspace: &Workspace, bounds: &WalkBounds) -> WorkspaceTree {
    let started = Instant::now();
    let mut tree = WorkspaceTree {
        complete: true,
        ..WorkspaceTree::default()
    };
    let mut seen = 0usize;
    let mut queue = VecDeque::from([(WorkspacePath::root(), 0usize)]);
    while let Some((dir, depth)) = queue.pop_front() {
        let Ok(entries) = workspace.list(dir.as_str()) else {
            // Gone or unreadable: what it holds is unknown.
            tree.complete = false;
            continue;
        };
        for entry in entries {
            seen += 1;
            if seen > bounds.max_entries || started.elapsed() > bounds.max_time {
                tree.complete = false;
                queue.clear();
                break;
            }
            if !offerable_name(&entry.name) {
                continue;
            }
            let Ok(path) = dir.join(&entry.name) else {
                continue;
            };
            match entry.kind {
                EntryKind::File => tree.files.push(path),
                EntryKind::Dir if depth + 1 > bounds.max_depth => tree.complete = false,
                EntryKind::Dir => {
                    tree.dirs.push(path.clone());
                    queue.push_back((path, depth + 1));
                }
                EntryKind::Symlink | EntryKind::Other => {}
            }
        }
    }
    tree.files.sort();
    tree.dirs.sort();
    tree
}

/// A name the walk offers: not hidden, valid UTF-8 (a lossy name would
/// be a different path), and exactly one component the door parses as is.
fn offerable_name(name: &str) -> bool {
    !name.starts_with('.')
        && !name.contains('\u{FFFD}')
        && WorkspacePath::parse(name).is_ok_and(|p| p.as_str() == name)
}

/// The choices for the path arguments of `offered` (the tools the model is
/// shown this call), from `session`'s workspace and policy.
pub fn path_choices(
    registry: &ToolRegistry,
    offered: &[ToolDef],
    session: &Session,
) -> PathChoices {
    path_choices_with(
        registry,
        offered,
        &session.policy,
        &session.resources.workspace,
        &WalkBounds::default(),
    )
}

/// [`path_choices`] with explicit parts and bounds. Walks the workspace
/// only if an offered tool takes a path.
pub fn path_choices_with(
    registry: &ToolRegistry,
    offered: &[ToolDef],
    policy: &EffectivePolicy,
    workspace: &Workspace,
    bounds: &WalkBounds,
) -> PathChoices {
    let params: Vec<(&str, crate::tool::PathParam)> = offered
        .iter()
        .filter_map(|def| registry.get(&def.name).map(|t| (def.name.as_str(), t)))
        .flat_map(|(name, tool)| tool.path_params().iter().map(move |p| (name, *p)))
        .collect();
    if params.is_empty() {
        return PathChoices::default();
    }
    let tree = walk(workspace, bounds);
    let may_read = |p: &WorkspacePath| policy.check_demand(&Demand::FileRead(p.clone())).is_ok();
    let may_write = |p: &WorkspacePath| policy.check_demand(&Demand::FileWrite(p.clone())).is_ok();
    let has = |kind: fn(&Capability) -> bool| policy.capabilities.iter().any(kind);
    let any_read = has(|c| matches!(c, Capability::FileRead { .. }));
    let any_write = has(|c| matches!(c, Capability::FileWrite { .. }));
    let listed = |paths: &mut dyn Iterator<Item = &WorkspacePath>| {
        AllowedPaths::Listed(paths.map(|p| p.as_str().to_owned()).collect())
    };
    let arguments = params
        .into_iter()
        .map(|(tool, param)| {
            let reads = matches!(param.access, PathAccess::Read | PathAccess::ReadWrite);
            let writes = matches!(param.access, PathAccess::Write | PathAccess::ReadWrite);
            let allowed = if (reads && !any_read) || (writes && !any_write) {
                AllowedPaths::Listed(Vec::new())
            } else if param.access == PathAccess::Write || !tree.complete {
                // A target that need not exist, or a partial listing that
                // would hide files that do.
                AllowedPaths::Relative
            } else {
                let ok = |p: &&WorkspacePath| may_read(p) && (!writes || may_write(p));
                match param.kind {
                    PathKind::File => listed(&mut tree.files.iter().filter(ok)),
                    PathKind::Directory => {
                        let root = WorkspacePath::root();
                        let root = Some(&root).filter(ok);
                        listed(&mut root.into_iter().chain(tree.dirs.iter().filter(ok)))
                    }
                }
            };
            PathArgumentChoices {
                tool: tool.to_owned(),
                argument: param.argument.to_owned(),
                kind: param.kind,
                reads_only: param.access == PathAccess::Read,
                allowed,
            }
        })
        .collect();
    PathChoices { arguments }
}
