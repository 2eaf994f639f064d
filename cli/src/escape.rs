//! What the plugin prints of what others wrote. Reasons, messages, Event notes, plan lines and
//! names come from objects a tenant can write (a status, an Event, a spec), and a terminal acts
//! on what it is sent: an escape sequence in a message could clear the admin's screen, rewrite
//! the lines above it, set the window title or hide text. Every such string is shown escaped,
//! as `\e`, `\n`, `\u{202e}`: visible, and inert.
//!
//! Escaped are the C0 and C1 control characters and DEL, and the invisible formatting
//! characters that reorder or hide text (bidirectional overrides and isolates, zero-width
//! characters, the byte-order mark): the "Trojan Source" set.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control or invisible formatting character escaped, newlines included: one
/// value, one line.
pub fn field(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// The whole output: as [`field`], but its own line breaks are kept. The renderers escape each
/// field; this is the last line of defence for any text that reached the output another way.
pub fn output(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| needs_escape(c) && !(keep_newlines && c == '\n');
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !unsafe_char(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0, DEL, C1) and the formatting characters that change how the
/// surrounding text reads without being seen.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}' // zero-width space, joiners, LRM, RLM
                | '\u{2028}'..='\u{2029}' // line and paragraph separators
                | '\u{202a}'..='\u{202e}' // bidirectional embeddings and overrides
                | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
                | '\u{2066}'..='\u{2069}' // bidirectional isolates
                | '\u{feff}' // byte-order mark, zero-width no-break space
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_and_hidden_characters_are_shown_not_sent() {
        let hostile = "ok\u{1b}[2J\u{1b}]0;pwned\u{7}\r\nFAKE\u{202e}txt.exe\u{9b}31m\u{7f}";
        let shown = field(hostile);
        assert_eq!(
            shown,
            "ok\\e[2J\\e]0;pwned\\x07\\r\\nFAKE\\u{202e}txt.exe\\x9b31m\\x7f"
        );
        assert!(!shown.chars().any(needs_escape));
        assert_eq!(output("a\nb\u{1b}c\n"), "a\nb\\ec\n");
    }

    #[test]
    fn plain_text_is_left_alone_and_not_copied() {
        for plain in [
            "",
            "Ready",
            "team 42 (\"Payments EU\") on TerdutServer ns/t",
            "└─ Grüße ✓",
        ] {
            assert!(matches!(field(plain), Cow::Borrowed(_)), "{plain}");
        }
        assert_eq!(field("tab\there"), "tab\\there");
    }
}
