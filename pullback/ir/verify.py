"""PLACEHOLDER until the verifier lands (being written now)."""


def verify(func):
    return None
