"""CLI commands for agents at work: daemon (the scheduler) and chat."""
