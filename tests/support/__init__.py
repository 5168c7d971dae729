"""Test doubles the tests share: things that stand in for a clock, a scheduler
or a timer so a test decides when time passes and background work runs. None
stands in for a component a user would run; product code never imports them.
Importable as ``support`` (pyproject's pytest ``pythonpath`` is ``tests``).
"""
