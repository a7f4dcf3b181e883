"""The SubFlow primitive: a parent Flow fans out to child Flows and completes with their results."""
