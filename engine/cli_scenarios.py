"""CLI commands for scenarios: experiment."""
