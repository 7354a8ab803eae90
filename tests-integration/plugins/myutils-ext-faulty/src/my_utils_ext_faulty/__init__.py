"""A my_utils plugin whose components fail when used (integration tests)."""
