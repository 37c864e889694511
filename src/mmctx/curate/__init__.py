"""Build a few-shot benchmark from a pool: embed → select queries → retrieve demos → rationales."""
