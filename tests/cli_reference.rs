//! docs/cli.md is the CLI reference, generated from clap's own `--help`
//! output of the built binary, never copied by hand: this test regenerates
//! it in memory and fails when the file differs. After a CLI change run
//! `HYPCLEAR_UPDATE_DOCS=1 cargo test --release --test cli_reference`,
//! which rewrites the file instead.
use std::path::Path;
use std::process::Command;

const REGENERATE: &str = "HYPCLEAR_UPDATE_DOCS=1 cargo test --release --test cli_reference";

/// `hypclear ARGS`' stdout, with a fixed help width and no colours, so the
/// text does not depend on the terminal the tests run in.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hypclear"))
        .args(args)
        .env("COLUMNS", "100")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .output()
        .expect("run the hypclear binary");
    assert!(
        out.status.success(),
        "hypclear {args:?} exited {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help text is UTF-8")
}

/// The subcommand names listed under `Commands:` in the top-level help
/// (clap's own `help` entry left out).
fn subcommands(top: &str) -> Vec<String> {
    let section = top
        .split_once("\nCommands:\n")
        .map(|(_, rest)| rest)
        .expect("`hypclear --help` has a Commands: section");
    section
        .lines()
        .take_while(|l| !l.trim().is_empty())
        // A name line is indented by two spaces; wrapped descriptions by more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The whole of docs/cli.md.
fn reference() -> String {
    let top = help(&["--help"]);
    let subs = subcommands(&top);
    assert!(
        subs.len() >= 5,
        "too few subcommands parsed from `hypclear --help`: {subs:?}"
    );
    let mut md = String::from(
        "# hypclear command-line reference\n\n\
         Generated from the binary's own `--help` output by `tests/cli_reference.rs`;\n\
         do not edit. After a CLI change, regenerate it with\n",
    );
    md.push_str(&format!("`{REGENERATE}`.\n\nCommands:"));
    for s in &subs {
        md.push_str(&format!(" [{s}](#hypclear-{s})"));
    }
    md.push('\n');
    let mut section = |title: &str, text: &str| {
        md.push_str(&format!(
            "\n## {title}\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
    };
    section("hypclear", &top);
    for s in &subs {
        section(&format!("hypclear {s}"), &help(&[s, "--help"]));
    }
    md
}

/// Where `expected` and `actual` first differ, for the failure message.
fn first_difference(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<_>, Vec<_>) = (expected.lines().collect(), actual.lines().collect());
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i), a.get(i));
        if x != y {
            return format!(
                "first difference at line {}:\n  docs/cli.md:   {}\n  the binary's: {}",
                i + 1,
                x.map_or("<end of file>", |s| s),
                y.map_or("<end of text>", |s| s)
            );
        }
    }
    "the files differ only in their final newline".to_string()
}

#[test]
fn docs_cli_md_is_the_binarys_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let generated = reference();
    if std::env::var("HYPCLEAR_UPDATE_DOCS").as_deref() == Ok("1") {
        std::fs::write(&path, &generated).expect("write docs/cli.md");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == generated,
        "docs/cli.md is not the binary's help text ({}); regenerate it with `{REGENERATE}` \
         and review the diff (git diff docs/cli.md)",
        first_difference(&current, &generated)
    );
}

#[test]
fn the_subcommand_list_is_parsed_from_the_help() {
    let top = "Usage: x\n\nCommands:\n  run   Run it\n        more words\n  info  Info\n  \
               help  Print this message\n\nOptions:\n  -h\n";
    assert_eq!(subcommands(top), ["run", "info"]);
}

/// The declared minimum Rust version is one number, used by every crate
/// and named in README's requirements: an older cargo then refuses the
/// build by name instead of failing on some edition-2024 syntax.
#[test]
fn every_crate_declares_the_one_rust_version_readme_names() {
    let root = env!("CARGO_MANIFEST_DIR");
    let top = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let msrv = top
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("[workspace.package] rust-version = \"X.Y\" in Cargo.toml");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    assert!(
        readme.contains(&format!("Rust >= {msrv} ")),
        "README's requirements must name Rust >= {msrv}"
    );
    let mut manifests = vec![format!("{root}/Cargo.toml")];
    for e in std::fs::read_dir(format!("{root}/crates")).unwrap() {
        manifests.push(format!("{}/Cargo.toml", e.unwrap().path().display()));
    }
    for m in manifests {
        let text = std::fs::read_to_string(&m).unwrap();
        assert!(
            text.contains("\nrust-version.workspace = true\n"),
            "{m}: every package inherits rust-version from the workspace"
        );
    }
}
