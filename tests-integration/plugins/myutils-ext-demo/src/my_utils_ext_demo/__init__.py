"""A third-party my_utils plugin used by the integration tests."""
