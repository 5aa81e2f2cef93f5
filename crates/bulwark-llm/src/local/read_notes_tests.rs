use super::*;
use crate::{AllowedPaths, Message, PathArgumentChoices, PathChoices, PathKind};
use serde_json::json;

use crate::local::test_wrap::{CLOSE, OPEN, wrap};

/// The question, one assistant turn reading `files`, their results.
fn request(question: &str, files: &[(&str, &str)]) -> ChatRequest {
    let calls = files
        .iter()
        .enumerate()
        .map(|(i, (path, _))| Block::ToolUse {
            id: i.to_string(),
            name: "file_read".into(),
            input: json!({ "path": path }),
        })
        .collect();
    let results = files
        .iter()
        .enumerate()
        .map(|(i, (_, body))| Block::ToolResult {
            tool_use_id: i.to_string(),
            content: wrap(body),
            is_error: false,
            taint: vec![],
        })
        .collect();
    ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![
            Message::user_text(question),
            Message {
                role: Role::Assistant,
                blocks: calls,
            },
            Message {
                role: Role::User,
                blocks: results,
            },
        ],
        tools: vec![],
        max_tokens: 10,
        paths: PathChoices {
            arguments: vec![PathArgumentChoices {
                tool: "file_read".into(),
                argument: "path".into(),
                kind: PathKind::File,
                reads_only: true,
                allowed: AllowedPaths::Relative,
            }],
        },
    }
}

fn after(request: &ChatRequest, id: &str) -> String {
    let notes = ReadNotes::new(request);
    let Some(Block::ToolResult { content, .. }) = request.messages[2]
        .blocks
        .iter()
        .find(|b| matches!(b, Block::ToolResult { tool_use_id, .. } if tool_use_id == id))
    else {
        panic!("no result {id}");
    };
    notes.after(id, &request.messages[0].text(), content)
}

#[test]
fn missing_words_are_noted_only_for_the_file_the_question_names() {
    let req = request(
        "Which engineer in contacts.csv lives in Lagos?",
        &[
            ("contacts.csv", "name,role,city\nBen,engineer,Lagos"),
            ("notes.txt", "Meetings on Thursdays."),
        ],
    );
    assert_eq!(after(&req, "0"), "");
    assert_eq!(after(&req, "1"), "", "notes.txt was not asked about");
    let req = request(
        "What is the price of the purple widget in prices.csv?",
        &[("prices.csv", "item,colour,price\nwidget,blue,4.50")],
    );
    assert_eq!(
        after(&req, "0"),
        "\n(Searched by the program: the question's word \"purple\" is not in this file; there is no row with it.)"
    );
}

#[test]
fn two_named_files_are_compared_after_the_second() {
    let req = request(
        "Do old.ini and new.ini use the same port?",
        &[
            ("old.ini", "port = 80\nworkers = 4"),
            ("new.ini", "port = 80\nworkers = 8"),
        ],
    );
    assert_eq!(after(&req, "0"), "");
    let second = after(&req, "1");
    assert!(second.starts_with("\n(Compared by the program"), "{second}");
    assert!(
        second.contains("workers = 4 \u{2192} workers = 8"),
        "{second}"
    );
    // A file read that the question does not name is compared with
    // nothing.
    let req = request(
        "What port does old.ini use?",
        &[("old.ini", "port = 80"), ("new.ini", "port = 81")],
    );
    assert_eq!(after(&req, "1"), "");
}

#[test]
fn two_files_read_for_what_they_share_are_compared_named_or_not() {
    let req = request(
        "Which player is in both the U12 and the U14 squads?",
        &[
            ("a.csv", "name,shirt\nKai Mensah,6\nLeo Hussain,2"),
            ("b.csv", "name,shirt\nKai Mensah,12\nRyan Holt,1"),
        ],
    );
    let second = after(&req, "1");
    assert!(second.contains("(Compared by the program"), "{second}");
    assert!(second.contains("Kai Mensah"), "{second}");
    // The two compared are what was asked about: the answer is next.
    assert_eq!(
        ReadNotes::new(&req).searched_in(&req.messages[2]),
        (0, true)
    );
    let listed = ["a.csv", "b.csv", "c.md", "d.md"];
    let files = [
        ("a.csv", "name,shirt\nKai Mensah,6"),
        ("b.csv", "name,shirt\nKai Mensah,12"),
    ];
    let looking = searching("Which player is in both squads?", &listed, &files);
    let notes = ReadNotes::new(&looking);
    assert_eq!(notes.searched_in(&looking.messages[2]), (0, true));
    assert!(!after(&looking, "0").contains("Searched by the program"));
    assert!(asks_across_files(
        "Who gave in February but not in January?"
    ));
    assert!(asks_across_files("How do the two quotes differ?"));
    assert!(!asks_across_files("But is it not raining?"));
    assert!(!asks_across_files("Who plays in the U14 squad?"));
}

#[test]
fn a_call_that_read_no_file_gets_no_note() {
    let req = request("How many items?", &[("todo.md", "- a\n- b")]);
    assert_eq!(
        ReadNotes::new(&req).after("9", "How many items?", &wrap("- a\n- b")),
        ""
    );
    assert_eq!(
        after(&req, "0"),
        "\n(Counted by the program: 2 list items.)"
    );
}

/// [`request`] for a session whose reader lists `listed`.
pub(super) fn searching(question: &str, listed: &[&str], files: &[(&str, &str)]) -> ChatRequest {
    let mut req = request(question, files);
    req.tools = vec![crate::ToolDef {
        name: "file_read".into(),
        description: String::new(),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    req.paths.arguments[0].allowed =
        AllowedPaths::Listed(listed.iter().map(|p| (*p).to_owned()).collect());
    req
}

#[test]
fn a_search_that_missed_with_files_left_reads_on() {
    use crate::ToolChoice;
    use crate::local::{TurnKind, turn_kind};
    let env = "APP_PORT=8443\nDB_HOST=db.internal";
    let listed = ["app.env", "errors.log", "runbook.md"];
    let missed = searching("Who is the on-call engineer?", &listed, &[("app.env", env)]);
    assert!(matches!(
        turn_kind(&missed, 2, ToolChoice::Auto),
        TurnKind::Tools { text: false, .. }
    ));
    // A find answers; so may a turn after a read that searched nothing.
    let found = searching("What is the DB host?", &listed, &[("app.env", env)]);
    assert_eq!(turn_kind(&found, 2, ToolChoice::Auto), TurnKind::Text);
    let named = request(
        "Who is the on-call engineer in app.env?",
        &[("app.env", env)],
    );
    assert!(!matches!(
        turn_kind(&named, 2, ToolChoice::Auto),
        TurnKind::Tools { text: false, .. }
    ));
}

const OFFICE: &[&str] = &["contacts.csv", "notes.txt", "todo.md"];

#[test]
fn a_search_that_missed_earns_a_call_and_one_that_found_ends_the_answer() {
    let q = "Find the launch code name somewhere in your workspace.";
    let missed = searching(q, OFFICE, &[("contacts.csv", "name,city\nAna,Lisbon")]);
    assert_eq!(
        after(&missed, "0"),
        "\n(Searched by the program: the question's words \"launch\" and \"code\" are not in this file; 2 files are not read yet.)"
    );
    assert_eq!(
        ReadNotes::new(&missed).searched_in(&missed.messages[2]),
        (1, false)
    );
    // With a budget of one call, the miss leaves one more, and the
    // next turn must make it.
    let one_more = crate::local::TurnKind::Tools {
        max_calls: 1,
        text: false,
    };
    let choice = crate::local::ToolChoice::Required;
    assert_eq!(crate::local::turn_kind(&missed, 1, choice), one_more);

    let found = searching(
        q,
        OFFICE,
        &[("notes.txt", "The launch code name is BLUE HERON.")],
    );
    assert_eq!(
        ReadNotes::new(&found).searched_in(&found.messages[2]),
        (0, true)
    );
    assert_eq!(
        crate::local::turn_kind(&found, 5, choice),
        crate::local::TurnKind::Text,
        "found: the model answers"
    );
}

#[test]
fn a_question_that_names_a_file_is_no_search() {
    let names = [
        "Find the launch code name in notes.txt.",
        "What is the launch code name in the CSV file?",
        "Is the launch code name in /etc/passwd?",
    ];
    for q in names {
        let req = searching(q, OFFICE, &[("contacts.csv", "name,city\nAna,Lisbon")]);
        assert_eq!(
            ReadNotes::new(&req).searched_in(&req.messages[2]).0,
            0,
            "{q}"
        );
        assert!(!after(&req, "0").contains("not read yet"), "{q}");
    }
}

#[test]
fn once_every_named_file_is_read_the_model_answers() {
    let choice = crate::local::ToolChoice::Required;
    let q = "In which bin are the fuses, according to contacts.csv?";
    let req = searching(q, OFFICE, &[("contacts.csv", "name,city\nAna,Lisbon")]);
    assert_eq!(
        ReadNotes::new(&req).searched_in(&req.messages[2]),
        (0, true)
    );
    assert_eq!(
        crate::local::turn_kind(&req, 2, choice),
        crate::local::TurnKind::Text
    );
    // Two named, one read: the other is still to be read.
    let q = "Do contacts.csv and notes.txt name the same city?";
    let req = searching(q, OFFICE, &[("contacts.csv", "name,city\nAna,Lisbon")]);
    assert_eq!(
        ReadNotes::new(&req).searched_in(&req.messages[2]),
        (0, false)
    );
    assert_ne!(
        crate::local::turn_kind(&req, 2, choice),
        crate::local::TurnKind::Text
    );
}

#[test]
fn a_search_of_every_file_ends_with_the_files_that_have_the_words() {
    let q = "Which files mention max_connections?";
    let listed = ["a.conf", "b.conf", "c.md", "d.txt", "e.txt"];
    let req = searching(
        q,
        &listed,
        &[
            ("a.conf", "max_connections = 1"),
            ("b.conf", "max_connections = 2"),
            ("c.md", "# Handbook"),
            ("d.txt", "nothing"),
        ],
    );
    assert_eq!(
        after(&req, "1"),
        "\n(Searched by the program: the question's word \"max_connections\" is in this file; 3 files are not read yet.)"
    );
    assert_eq!(
        after(&req, "3"),
        format!(
            "\n(Searched by the program: the question's word \"max_connections\" is not in this file; the search stops here.)\n(Searched by the program: the files read that have them:)\n{OPEN}\na.conf\nb.conf\n{CLOSE}"
        )
    );
}

#[test]
fn earned_calls_are_bounded_per_question() {
    let many: Vec<String> = (0..10).map(|i| format!("f{i}.txt")).collect();
    let listed: Vec<&str> = many.iter().map(String::as_str).collect();
    let files: Vec<(&str, &str)> = listed.iter().map(|p| (*p, "nothing here")).collect();
    let req = searching("Which file mentions the harbor password?", &listed, &files);
    assert_eq!(
        ReadNotes::new(&req).searched_in(&req.messages[2]),
        (super::MAX_EARNED_READS, false)
    );
    // The read that ends a search for one thing says no file read
    // has its words; the reads that read on do not.
    let files: Vec<(&str, &str)> = listed[..5].iter().map(|p| (*p, "nothing here")).collect();
    let req = searching("What is the harbor password?", &listed, &files);
    assert!(after(&req, "3").ends_with(
        "the search stops here.)\n(Searched by the program: none of the files read has them.)"
    ));
    assert!(!after(&req, "1").contains("none of the files"));
    assert!(!after(&req, "0").contains("none of the files"));
}

#[test]
fn no_time_is_said_missing_when_an_earlier_read_gave_one() {
    let question = "Who's on air Sunday morning and what time does the show start?";
    let mut req = request(
        question,
        &[(
            "schedule.md",
            "| Sun | 10:00-12:00 | Folk Roots | Maggie Doyle |\n",
        )],
    );
    // A second read, of a file with no time, after the schedule.
    req.messages.push(Message {
        role: Role::Assistant,
        blocks: vec![Block::ToolUse {
            id: "9".into(),
            name: "file_read".into(),
            input: json!({"path": "jingle.txt"}),
        }],
    });
    req.messages.push(Message {
        role: Role::User,
        blocks: vec![Block::ToolResult {
            tool_use_id: "9".into(),
            content: wrap("You're listening to Riverside Radio."),
            is_error: false,
            taint: vec![],
        }],
    });
    let notes = ReadNotes::new(&req);
    assert!(!notes.give_no_time(&req.messages, question));
    // The jingle alone: no file gave a time.
    assert!(notes.give_no_time(&req.messages[3..], question));
}
