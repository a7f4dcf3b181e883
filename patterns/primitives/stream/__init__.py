"""The Stream primitive: progress a Step writes while it runs, listed and followed live."""
