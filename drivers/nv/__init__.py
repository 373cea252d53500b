"""Not yet implemented (see the README device table)."""
