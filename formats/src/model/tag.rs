//! The tag forms: any OCI tag, and the release tags this tool makes (what the publisher
//! pushes under and what a receipt's verifier accepts).

use chrono::NaiveDate;

/// An OCI tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn is_valid_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => {}
        _ => return false,
    }
    tag.len() <= 128 && bytes.all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The release tags this tool makes: `YYYY.MM.DD-` and either the first 12 hex digits of the
/// release inputs' digest (`cargo xtask release`) or the workflow's run id (1 to 20 digits).
/// Returns the tag's day.
pub fn parse_release_tag(tag: &str) -> Option<NaiveDate> {
    let (day, suffix) = tag.split_once('-')?;
    let b = day.as_bytes();
    let shaped = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'.',
            _ => c.is_ascii_digit(),
        });
    if !shaped {
        return None;
    }
    let date = NaiveDate::parse_from_str(day, "%Y.%m.%d").ok()?;
    let inputs_digest = suffix.len() == 12
        && suffix
            .bytes()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let run_id = (1..=20).contains(&suffix.len())
        && suffix.bytes().all(|c| c.is_ascii_digit())
        && !suffix.starts_with('0');
    (inputs_digest || run_id).then_some(date)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags() {
        assert!(is_valid_tag("2026-11-30.1_a"));
        assert!(!is_valid_tag("-x"));
        assert!(!is_valid_tag(""));
        assert!(!is_valid_tag("a/b"));
        assert!(!is_valid_tag(&"a".repeat(129)));
    }

    #[test]
    fn release_tags_are_the_forms_the_tool_makes() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 30);
        assert_eq!(parse_release_tag("2026.11.30-0123456789ab"), day);
        assert_eq!(parse_release_tag("2026.11.30-12345678901"), day);
        for bad in [
            "2026-11-30.1",
            "2026.11.30-0123456789AB",
            "2026.11.30-0123456789a",
            "2026.11.30-0123",
            "2026.02.30-0123456789ab",
            "2026.11.30",
            "latest",
            "2026.11.30-0123456789ab-x",
            "2026.11.30-012345",
            "2026.11.30-123456789012345678901",
            "v2026.11.30-0123456789ab",
        ] {
            assert_eq!(parse_release_tag(bad), None, "{bad}");
        }
    }
}
