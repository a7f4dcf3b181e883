"""The Channel primitive: a transactional RPC moves a queued message to the prioritized queue."""
