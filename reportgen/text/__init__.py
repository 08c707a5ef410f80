"""Pure text helpers every layer may use: terminal and Markdown escaping, number formatting."""
