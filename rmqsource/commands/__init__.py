"""The ``rmq`` subcommands; output.py holds what they share (the parser and ``main`` live in cli.py)."""
