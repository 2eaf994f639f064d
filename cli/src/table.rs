//! Column-aligned text, the way `kubectl get` lays out its tables: every column as wide as its
//! widest cell, three spaces between columns, no trailing blanks. Every cell is escaped
//! (`escape.rs`): a cell is one line of inert text whatever its object's author wrote.

use crate::escape::field;

/// Lays out `rows` (the first one is the header) in aligned columns.
pub fn layout(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| field(cell).into_owned()).collect())
        .collect();
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 3;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligns_by_characters_not_bytes() {
        let rows = vec![
            vec!["A".to_string(), "B".into(), "".into()],
            vec!["└─ xy".into(), "1".into(), "".into()],
        ];
        assert_eq!(super::layout(&rows), "A       B\n└─ xy   1\n");
    }

    #[test]
    fn a_cell_is_one_line_of_inert_text() {
        let rows = vec![
            vec!["A".to_string(), "B".into()],
            vec!["x\n  fake row".into(), "\u{1b}[31mred".into()],
        ];
        assert_eq!(
            super::layout(&rows),
            "A               B\nx\\n  fake row   \\e[31mred\n"
        );
    }
}
