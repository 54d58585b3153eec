"""What the tests share that is not a fixture: helpers, constants, the fakes.

Test modules import from here, never from `tests.conftest` or from another test module;
conftest files hold the fixtures and may import from here too. Nothing here is collected as a
test (no file is named `test_*.py`), and nothing here spawns a process on import.
"""
