"""Persistence: tables, database set-up, the single writer, and queries. Knows rows, not Flows."""
