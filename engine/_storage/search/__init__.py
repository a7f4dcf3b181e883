"""SearchFlows: the query language (grammar, parser, typed compiler to SQL) and page tokens.

Kept free of imports so that ``tables`` can import :mod:`.fulltext` without pulling in the
parser. The pieces:

- ``grammar.lark`` and :mod:`.parser`: query text to a small syntax tree, with bounded length,
  depth and size, and errors that carry the position and what was expected;
- :mod:`.compiler`: the tree, checked against the types of the index keys, to one SQLAlchemy Core
  condition on ``runs`` where every value is a bound parameter;
- :mod:`.fulltext`: what a FULL_TEXT token is, and the only dialect-specific SQL (SQLite FTS5,
  a PostgreSQL tsvector with a GIN index);
- :mod:`.paging`: opaque next-page tokens bound to their query;
- :mod:`.driver`: leading a conjunction from one index key's rows, in the default order;
- :mod:`.queries`: the read statements (a page of runs with their indexed values).
"""
