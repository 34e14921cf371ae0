"""The Fleet page: several servers in one window."""
