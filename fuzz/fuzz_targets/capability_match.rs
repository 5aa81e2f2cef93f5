//! Capability matching decides every tool call. `covers` must never panic,
//! and subsumption must be sound: if `a ⊆ b` was claimed (child ⊆ parent,
//! or within a ceiling), every demand `a` covers is covered by `b` too.
#![no_main]

use arbitrary::Arbitrary;
use bulwark_policy::{Capability, CapabilitySet, Demand, WorkspacePath};
use libfuzzer_sys::fuzz_target;

/// Pattern and value text is built from a small alphabet that hits the
/// wildcards, separators and host syntax, plus arbitrary text now and then.
#[derive(Arbitrary, Debug, Clone)]
enum Atom {
    A,
    B,
    UpperA,
    Dot,
    DotDot,
    Star,
    StarStar,
    Quest,
    Slash,
    Colon,
    Digit(u8),
    Open,
    Close,
    Dash,
    Space,
    Raw(String),
}

#[derive(Arbitrary, Debug, Clone)]
struct Text(Vec<Atom>);

impl Text {
    fn render(&self) -> String {
        let mut s = String::new();
        for atom in &self.0 {
            match atom {
                Atom::A => s.push('a'),
                Atom::B => s.push('b'),
                Atom::UpperA => s.push('A'),
                Atom::Dot => s.push('.'),
                Atom::DotDot => s.push_str(".."),
                Atom::Star => s.push('*'),
                Atom::StarStar => s.push_str("**"),
                Atom::Quest => s.push('?'),
                Atom::Slash => s.push('/'),
                Atom::Colon => s.push(':'),
                Atom::Digit(d) => s.push(char::from(b'0' + d % 10)),
                Atom::Open => s.push('['),
                Atom::Close => s.push(']'),
                Atom::Dash => s.push('-'),
                Atom::Space => s.push(' '),
                Atom::Raw(r) => s.push_str(r),
            }
        }
        s
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Scope {
    Agent,
    User,
    Any,
    Other,
}

impl Scope {
    fn render(self) -> String {
        match self {
            Scope::Agent => "agent",
            Scope::User => "user",
            Scope::Any => "*",
            Scope::Other => "team",
        }
        .to_owned()
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum Cap {
    FileRead(Text),
    FileWrite(Text),
    NetConnect(Text),
    ToolInvoke(Text),
    ToolAll,
    ShellExec(Vec<Text>),
    MemoryRead(Scope),
    MemoryWrite(Scope),
    AgentSpawn(Text),
    AgentMessage(Text),
    AgentKill(Text),
    LlmQuery(Text),
    LlmMaxTokens(u32),
    EconSpend(u64),
    EconTransfer(u64),
}

impl Cap {
    fn build(&self) -> Capability {
        use Capability as C;
        match self {
            Cap::FileRead(t) => C::FileRead { path: t.render() },
            Cap::FileWrite(t) => C::FileWrite { path: t.render() },
            Cap::NetConnect(t) => C::NetConnect { host: t.render() },
            Cap::ToolInvoke(t) => C::ToolInvoke { tool: t.render() },
            Cap::ToolAll => C::ToolAll,
            Cap::ShellExec(v) => C::ShellExec {
                argv: v.iter().map(Text::render).collect(),
            },
            Cap::MemoryRead(s) => C::MemoryRead { scope: s.render() },
            Cap::MemoryWrite(s) => C::MemoryWrite { scope: s.render() },
            Cap::AgentSpawn(t) => C::AgentSpawn { agent: t.render() },
            Cap::AgentMessage(t) => C::AgentMessage { agent: t.render() },
            Cap::AgentKill(t) => C::AgentKill { agent: t.render() },
            Cap::LlmQuery(t) => C::LlmQuery { model: t.render() },
            Cap::LlmMaxTokens(n) => C::LlmMaxTokens { max: *n },
            Cap::EconSpend(n) => C::EconSpend { max: *n },
            Cap::EconTransfer(n) => C::EconTransfer { max: *n },
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Dem {
    FileRead(Text),
    FileWrite(Text),
    NetConnect(Text, u16),
    Tool(Text, Text),
    ShellExec(Vec<Text>),
    MemoryRead(Scope),
    MemoryWrite(Scope),
    AgentSpawn(Text),
    AgentMessage(Text),
    AgentKill(Text),
    LlmQuery(Text),
    LlmTokens(u32),
    EconSpend(u64),
    EconTransfer(u64),
}

impl Dem {
    /// `None` when the text is not a workspace path (no such demand exists).
    fn build(&self) -> Option<Demand> {
        use Demand as D;
        Some(match self {
            Dem::FileRead(t) => D::FileRead(WorkspacePath::parse(&t.render()).ok()?),
            Dem::FileWrite(t) => D::FileWrite(WorkspacePath::parse(&t.render()).ok()?),
            Dem::NetConnect(h, port) => D::NetConnect {
                host: h.render(),
                port: *port,
            },
            Dem::Tool(d, o) => D::Tool {
                domain: d.render(),
                operation: o.render(),
            },
            Dem::ShellExec(v) => D::ShellExec(v.iter().map(Text::render).collect()),
            Dem::MemoryRead(s) => D::MemoryRead(s.render()),
            Dem::MemoryWrite(s) => D::MemoryWrite(s.render()),
            Dem::AgentSpawn(t) => D::AgentSpawn(t.render()),
            Dem::AgentMessage(t) => D::AgentMessage(t.render()),
            Dem::AgentKill(t) => D::AgentKill(t.render()),
            Dem::LlmQuery(t) => D::LlmQuery(t.render()),
            Dem::LlmTokens(n) => D::LlmTokens(*n),
            Dem::EconSpend(n) => D::EconSpend(*n),
            Dem::EconTransfer(n) => D::EconTransfer(*n),
        })
    }
}

/// One change to a pattern: put `atom` at a position chosen by `at`
/// (inserted, or replacing the atom there).
#[derive(Arbitrary, Debug)]
struct Edit {
    at: u8,
    atom: Atom,
    insert: bool,
}

/// The wide capability: free-standing, or the narrow one edited (mostly
/// widened by wildcards), so that subset pairs are common.
#[derive(Arbitrary, Debug)]
enum Wide {
    Free(Cap),
    Edited(Vec<Edit>),
}

/// A demand: free-standing, or the narrow capability's own kind with its
/// wildcards filled in from `fill`, so that covered demands are common.
#[derive(Arbitrary, Debug)]
enum DemSpec {
    Free(Dem),
    Like { fill: Vec<Atom>, port: u16, n: u32 },
}

impl Cap {
    fn texts_mut(&mut self) -> Vec<&mut Text> {
        match self {
            Cap::FileRead(t)
            | Cap::FileWrite(t)
            | Cap::NetConnect(t)
            | Cap::ToolInvoke(t)
            | Cap::AgentSpawn(t)
            | Cap::AgentMessage(t)
            | Cap::AgentKill(t)
            | Cap::LlmQuery(t) => vec![t],
            Cap::ShellExec(v) => v.iter_mut().collect(),
            _ => Vec::new(),
        }
    }

    fn edited(&self, edits: &[Edit]) -> Cap {
        let mut cap = self.clone();
        let mut texts = cap.texts_mut();
        if !texts.is_empty() {
            for edit in edits {
                let at = usize::from(edit.at);
                let count = texts.len();
                let text = &mut texts[at % count].0;
                let pos = (at / 4) % (text.len() + 1);
                if edit.insert || pos == text.len() {
                    text.insert(pos, edit.atom.clone());
                } else {
                    text[pos] = edit.atom.clone();
                }
            }
        }
        cap
    }

    fn demand_like(&self, fill: &[Atom], port: u16, n: u32) -> Dem {
        let mut k = 0;
        let mut inst = |t: &Text| {
            Text(
                t.0.iter()
                    .filter_map(|a| match a {
                        Atom::Star | Atom::StarStar | Atom::Quest => {
                            k += 1;
                            fill.get(k % fill.len().max(1)).cloned()
                        }
                        other => Some(other.clone()),
                    })
                    .collect(),
            )
        };
        match self {
            Cap::FileRead(t) => Dem::FileRead(inst(t)),
            Cap::FileWrite(t) => Dem::FileWrite(inst(t)),
            Cap::NetConnect(t) => Dem::NetConnect(inst(t), port),
            Cap::ToolInvoke(t) => Dem::Tool(inst(t), Text(fill.to_vec())),
            Cap::ToolAll => Dem::Tool(Text(fill.to_vec()), Text(Vec::new())),
            Cap::ShellExec(v) => Dem::ShellExec(v.iter().map(&mut inst).collect()),
            Cap::MemoryRead(s) => Dem::MemoryRead(*s),
            Cap::MemoryWrite(s) => Dem::MemoryWrite(*s),
            Cap::AgentSpawn(t) => Dem::AgentSpawn(inst(t)),
            Cap::AgentMessage(t) => Dem::AgentMessage(inst(t)),
            Cap::AgentKill(t) => Dem::AgentKill(inst(t)),
            Cap::LlmQuery(t) => Dem::LlmQuery(inst(t)),
            Cap::LlmMaxTokens(_) => Dem::LlmTokens(n),
            Cap::EconSpend(_) => Dem::EconSpend(u64::from(n)),
            Cap::EconTransfer(_) => Dem::EconTransfer(u64::from(n)),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    narrow: Cap,
    wide: Wide,
    demands: Vec<DemSpec>,
}

fuzz_target!(|input: Input| {
    let a = input.narrow.build();
    let b = match &input.wide {
        Wide::Free(cap) => cap.build(),
        Wide::Edited(edits) => input.narrow.edited(edits).build(),
    };
    let subset = a.is_subset_of(&b);
    let set_subset =
        CapabilitySet::new(vec![a.clone()]).is_subset_of(&CapabilitySet::new(vec![b.clone()]));
    assert_eq!(subset, set_subset);
    if subset {
        assert!(a.validate().is_ok() && b.validate().is_ok());
    }
    let demands = input.demands.iter().map(|spec| match spec {
        DemSpec::Free(dem) => dem.build(),
        DemSpec::Like { fill, port, n } => input.narrow.demand_like(fill, *port, *n).build(),
    });
    for demand in demands.flatten() {
        let a_covers = a.covers(&demand);
        let b_covers = b.covers(&demand);
        if a_covers {
            assert!(a.validate().is_ok(), "invalid {a:?} covers {demand:?}");
        }
        if subset && a_covers {
            assert!(
                b_covers,
                "{a} is claimed within {b} and covers {demand}, which {b} does not"
            );
        }
    }
});
