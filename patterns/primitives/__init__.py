"""The primitive examples: one small Flow and its routes each, mounted under ``/primitives/``."""
