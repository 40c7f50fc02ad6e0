"""`python -m kubetrain.frameworks.controllers`: the contracts' tables for docs/foreign.md."""

from .table import markdown

print(markdown())
