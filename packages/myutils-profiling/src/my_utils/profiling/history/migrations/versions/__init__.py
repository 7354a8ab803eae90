"""One module per revision of the run store's schema, oldest first."""
