"""The `gridagg` command line: the entry point (main) and the core's subcommands (query,
tune, commands), with the local servers behind `gridagg services` (services)."""
