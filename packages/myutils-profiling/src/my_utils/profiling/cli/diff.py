"""``myutils-profile diff``: registered on the shared app by this module (issue 10 builds it)."""
