"""How commits go on SQLite: through the database's one ordered writer, in this process."""
