"""CLI subcommands of `harnessrl`, one module per command group."""
