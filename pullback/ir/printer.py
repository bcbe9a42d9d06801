"""PLACEHOLDER until the printer lands (being written now)."""


def format_func(func):
    return repr(func)
