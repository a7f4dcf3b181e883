"""The engine's machinery: clock, locks, timers, the Step scheduler and the RPC executor."""
