//! Text bounded for the API: a condition's message, a failing pod's reason, an Event's
//! note and the levels summary each have a byte limit.

/// Cuts `s` to at most `max` bytes, at a character boundary, marking the cut with `...`.
pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max.saturating_sub(3);
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn cuts_at_a_character_boundary_and_marks_the_cut() {
        assert_eq!(truncate("short".into(), 10), "short");
        assert_eq!(truncate("abcdefghij".into(), 10), "abcdefghij");
        assert_eq!(truncate("abcdefghijk".into(), 10), "abcdefg...");
        // "é" is two bytes: the cut moves back to the character's start.
        let cut = truncate("aaaaaé-tail".into(), 9);
        assert_eq!(cut, "aaaaa...");
        assert!(cut.len() <= 9);
    }
}
