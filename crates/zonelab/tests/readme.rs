//! The README's tour runs as written (its ```` ```sh tour ```` blocks, in an empty directory, with this
//! build's `zonelab` on the PATH), and every relative link of the README and docs/ points at a file that exists.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of every fenced block whose info string is `sh tour`.
fn tour(readme: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in readme.lines() {
        if inside && line.starts_with("```") {
            inside = false;
        } else if inside {
            lines.push(line.to_string());
        } else if line.trim_end() == "```sh tour" {
            inside = true;
        }
    }
    lines
}

#[test]
fn the_readme_tour_runs_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let script = tour(&readme);
    assert!(script.len() >= 8, "the README has a tour block: {script:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = Path::new(env!("CARGO_BIN_EXE_zonelab")).parent().expect("bin dir").to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script.join("\n")])
        .current_dir(dir.path())
        .env("PATH", path)
        .output()
        .expect("run bash");
    assert!(
        output.status.success(),
        "the README's tour failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("Claims at a glance"), "the tour shows a report's claims: {printed}");
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut documents = vec![root().join("README.md")];
    for directory in ["docs", "docs/notes"] {
        for entry in std::fs::read_dir(root().join(directory)).expect("a docs directory") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|ext| ext == "md") {
                documents.push(path);
            }
        }
    }
    let mut broken = Vec::new();
    for document in &documents {
        let text = std::fs::read_to_string(document).expect("read");
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or_default();
            // A target with a space is code that happens to hold "](", not a link.
            if target.is_empty() || target.contains("://") || target.contains(' ') || target.starts_with("mailto:") {
                continue;
            }
            let resolved = document.parent().expect("a directory").join(target);
            if !resolved.exists() {
                broken.push(format!("{}: {target}", document.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing:\n{}", broken.join("\n"));
}
