"""The playground in a real browser (`make test-browser`)."""
