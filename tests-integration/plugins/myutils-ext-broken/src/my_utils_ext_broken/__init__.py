"""A my_utils plugin package that is broken on purpose (integration tests)."""
