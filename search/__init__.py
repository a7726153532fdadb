"""The search service: configuration space, capacity search, results, and the CLI."""
