"""The project's own rules: the import layers of DESIGN.md §2 and the install lock."""
