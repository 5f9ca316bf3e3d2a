//! Text from untrusted documents, made safe to print.
//!
//! A receipt's strings (smoke output, tags, references, file names) reach a consumer's
//! terminal through `receipt verify` and `pin`. Printed raw, an ANSI sequence can move the
//! cursor and overwrite the "rejected" line with a fake success, and bidi or zero-width
//! characters can make two different references look identical. So everything printed from a
//! receipt goes through [`escape`] (plain output) or [`json_escaped`] (`--json` output): every
//! control character, every Unicode format character that changes how text looks without
//! being visible, and the backslash itself are written as escapes.

/// Characters that are invisible or reorder text: bidi marks, overrides and isolates,
/// zero-width characters, the BOM, soft hyphen, Unicode tag characters, line and paragraph
/// separators and other format (Cf) characters that matter on a terminal.
pub fn is_invisible_or_reordering(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Must `c` be escaped before it reaches a terminal?
pub fn needs_escape(c: char) -> bool {
    c.is_control() || is_invisible_or_reordering(c)
}

/// `text` with `\` doubled and every control or invisible character as `\n`, `\t`, `\r` or
/// `\u{XXXX}`: what is printed is exactly what the document contains, visibly.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:04X}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Pretty JSON of `value` in which every character [`needs_escape`] that serde_json would
/// write raw (DEL, C1 controls, format characters) is a `\uXXXX` escape instead. Such
/// characters only occur inside JSON strings, where the escape means the same character, so
/// the document is unchanged for a JSON reader and harmless on a terminal.
pub fn json_escaped<T: serde::Serialize>(value: &T) -> serde_json::Result<String> {
    let text = serde_json::to_string_pretty(value)?;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if needs_escape(c) && !matches!(c, '\n' | '\t' | '\r') {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Prints [`json_escaped`] on stdout.
pub fn print_json_escaped<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", json_escaped(value)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_bidi_and_zero_width_are_visible() {
        assert_eq!(
            escape("ok\u{1b}[2K\u{1b}[1A valid"),
            "ok\\u{001B}[2K\\u{001B}[1A valid"
        );
        assert_eq!(
            escape("a\u{202e}b\u{200b}c\u{feff}"),
            "a\\u{202E}b\\u{200B}c\\u{FEFF}"
        );
        assert_eq!(escape("line\nnext\\u{41}"), "line\\nnext\\\\u{41}");
        assert_eq!(escape("\u{9b}31m \u{7f}"), "\\u{009B}31m \\u{007F}");
        assert_eq!(escape("\u{E0041}"), "\\u{E0041}");
        assert_eq!(escape("plain ü 字"), "plain ü 字");
    }

    #[test]
    fn json_output_escapes_what_serde_json_leaves_raw() {
        let value = serde_json::json!({"s": "a\u{1b}b\u{7f}c\u{202e}d\u{E0041}e ü"});
        let text = json_escaped(&value).unwrap();
        assert!(
            text.chars().all(|c| !needs_escape(c) || c == '\n'),
            "{text}"
        );
        assert!(
            text.contains("\\u001b") && text.contains("\\u202e"),
            "{text}"
        );
        assert!(text.contains("\\udb40\\udc41"), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
