"""The Schedule primitive: a Flow started on its own, every few seconds."""
