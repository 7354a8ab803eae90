"""A my_utils plugin whose component names clash (integration tests)."""
