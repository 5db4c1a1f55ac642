"""Implementations of the larger ``rmq`` subcommands (the parser and shared output helpers live in cli.py)."""
