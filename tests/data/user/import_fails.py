"""Raises while it is imported (tests/test_user_errors.py)."""
import json

CONFIG = json.loads("{not json")


def f(x):
    return x
