"""The Timer primitive: a Step that waits on a durable Timer, then completes."""
