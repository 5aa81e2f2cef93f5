//! A child agent run from `bulwark run` is opened like its parent: under
//! `[audit] record_arguments = true` its calls' arguments are recorded too.

use super::common::{Bw, field, scripted, with_action};

/// A parent that may read files and spawn and message `kid`.
const BOSS: &str = r#"
[tools]
allow = ["agents", "files"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "agent_spawn"
agent = "kid"
[[capabilities]]
kind = "agent_message"
agent = "kid"
"#;

const KID: &str = r#"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "**"
"#;

#[test]
fn a_child_records_its_arguments_like_its_parent() {
    let bw = Bw::init();
    bw.write("config.toml", "[audit]\nrecord_arguments = true\n");
    bw.agent(
        "kid",
        &scripted("kid", KID),
        Some(
            "{\"tool_calls\":[{\"name\":\"file_read\",\"input\":{\"path\":\"kid-marker-4711.txt\"}}]}\n\
             {\"text\":\"kid done\"}\n",
        ),
    );
    bw.agent(
        "boss",
        &scripted("boss", BOSS),
        Some(
            "{\"tool_calls\":[{\"name\":\"file_read\",\"input\":{\"path\":\"boss-marker.txt\"}}]}\n\
             {\"tool_calls\":[{\"name\":\"spawn_agent\",\"input\":{\"agent\":\"kid\"}}]}\n\
             {\"text\":\"spawned\"}\n",
        ),
    );
    bw.run(&["run", "boss", "spawn a kid"]).ok();
    let kid = bw
        .sessions()
        .into_iter()
        .find(|(_, agent, _)| agent == "kid")
        .expect("a kid session")
        .0;
    let boss = bw
        .sessions()
        .into_iter()
        .find(|(_, agent, _)| agent == "boss")
        .expect("a boss session")
        .0;
    bw.write(
        "agents/boss/s.jsonl",
        &format!(
            "{{\"text\":\"unused\"}}\n{{\"text\":\"unused\"}}\n{{\"text\":\"unused\"}}\n\
             {{\"tool_calls\":[{{\"name\":\"message_child\",\"input\":{{\"child\":\"{kid}\",\"text\":\"read\"}}}}]}}\n\
             {{\"text\":\"the boss is done\"}}\n"
        ),
    );
    let out = bw.run(&["run", "boss", "ask the kid", "--session", &boss]);
    out.ok();
    assert!(out.stdout.contains("the boss is done"), "{}", out.stdout);
    let records = bw.audit();
    let arguments = with_action(&records, "arguments");
    // The parent's calls and the child's, each with its arguments.
    assert!(
        arguments
            .iter()
            .any(|r| field(r, "session") == boss && field(r, "detail").contains("boss-marker.txt")),
        "{arguments:#?}"
    );
    let kid_arguments: Vec<_> = arguments
        .iter()
        .filter(|r| field(r, "session") == kid)
        .collect();
    assert_eq!(kid_arguments.len(), 1, "{records:#?}");
    assert!(
        field(kid_arguments[0], "detail").contains("kid-marker-4711.txt"),
        "{kid_arguments:#?}"
    );
}
