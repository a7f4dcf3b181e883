"""Modules that test server processes import (Flows and app factories)."""
