"""The RPC canceling Steps primitive: a ``stop_report`` RPC cancels the Step writing a report."""
