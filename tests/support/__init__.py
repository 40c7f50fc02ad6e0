"""Helpers shared by the tests (not collected: no test_*.py here). Import them as ``tests.support.<module>``."""
