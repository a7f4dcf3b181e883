"""The Attribute primitive: indexed Attributes and AttributeMaps, locks and a hard-delete key."""
