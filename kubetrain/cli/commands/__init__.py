"""One module per verb: `add_arguments(parser)` beside `run(args) -> int`. Listed in `cli.registry`."""
