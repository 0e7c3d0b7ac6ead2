//! TOML documents decoded into typed configurations, with errors a user can act on: the line and the dotted key
//! at fault and the form the key takes, rather than serde's type names (`expected struct MediaConfig`).

use serde::de::DeserializeOwned;

/// Decodes `text`; the error names the line and key (`line 2: namespace.zones: invalid type: string "abc",
/// expected u32`).
pub fn decode<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|error| {
        let line = error.inner().span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        let at = line.map(|line| format!("line {line}: ")).unwrap_or_default();
        describe(&at, &error.path().to_string(), error.inner().message())
    })
}

/// Decodes a document already parsed (and perhaps edited, as presets are by overrides); the error names the key.
pub fn decode_table<T: DeserializeOwned>(table: toml::Table) -> Result<T, String> {
    serde_path_to_error::deserialize(table)
        .map_err(|error| describe("", &error.path().to_string(), error.inner().message()))
}

fn describe(at: &str, path: &str, message: &str) -> String {
    let message = plain_types(message);
    match path {
        "." | "" => format!("{at}{message}"),
        path => format!("{at}{path}: {message}"),
    }
}

/// serde says `expected struct MediaConfig` where the document needs a table.
fn plain_types(message: &str) -> String {
    match message.find("expected struct ") {
        Some(at) => {
            let rest = &message[at + "expected struct ".len()..];
            let name_end = rest.find(|c: char| !c.is_alphanumeric() && c != '_').unwrap_or(rest.len());
            format!("{}expected a table{}", &message[..at], &rest[name_end..])
        }
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NamespaceConfig;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        namespace: NamespaceConfig,
    }

    #[test]
    fn errors_name_the_line_the_key_and_the_form() {
        let error = decode::<Outer>("[namespace]\nzones = \"abc\"\n").expect_err("a string for a count");
        assert_eq!(error, "line 2: namespace.zones: invalid type: string \"abc\", expected u32");
        let error = decode::<Outer>("[namespace]\nzone-size = true\n").expect_err("a boolean for a size");
        assert!(error.starts_with("line 2: namespace.zone-size: "), "{error}");
        assert!(error.contains("a size such as \"16MiB\""), "{error}");
        let error = decode::<Outer>("namespace = 3\n").expect_err("a number for a table");
        assert_eq!(error, "line 1: namespace: invalid type: integer `3`, expected a table");
    }

    #[test]
    fn a_parsed_table_names_the_key_too() {
        let table: toml::Table = toml::from_str("[namespace]\nmax-open = -1\n").expect("valid TOML");
        let error = decode_table::<Outer>(table).expect_err("negative limit");
        assert!(error.starts_with("namespace.max-open: invalid value: integer `-1`"), "{error}");
    }
}
