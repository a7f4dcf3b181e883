"""The Hash-Partitioned AttributeMap pattern: keyed records spread over a fixed set of
AttributeMap instances, so a write locks one partition and writes to others never wait."""
