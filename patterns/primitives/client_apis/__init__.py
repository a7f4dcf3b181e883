"""The client APIs primitive: GetAttributes, SearchFlows and WaitForAttributeMatch."""
